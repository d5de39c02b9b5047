#!/usr/bin/env bash
# Installs a built Earshot as a system service (as root; idempotent: safe to run again after every
# build). Build first with `swift build -c release` (or plain `swift build`).
#
#   Scripts/install-system.sh                 install into / (prefix /usr/local)
#   Scripts/install-system.sh --dest DIR      stage the same tree under DIR (tests, packaging)
#   Scripts/install-system.sh --enable        also enable and start earshotd.socket and the timer
#
# Options:
#   --dest DIR, --destdir DIR  stage under DIR; touches nothing outside it and runs no system tools
#   --prefix DIR               where binaries and docs go (default /usr/local); unit paths follow
#   --build-dir DIR            take binaries from DIR (default: .build/release if it has every
#                              binary, else .build/debug)
#   --enable                   systemctl enable --now earshotd.socket earshot-update.timer
#                              (only when systemd is running)
#
# What goes where (prefix /usr/local):
#   /usr/local/bin/{earshotd,earshotctl,earshot}, /usr/local/libexec/earshot/earshot-engine
#   /usr/local/lib/systemd/system/{earshotd.service,earshotd.socket,earshot-update.service,.timer}
#   /usr/local/lib/sysusers.d/earshot.conf, /usr/local/lib/tmpfiles.d/earshot.conf
#   /usr/local/share/doc/earshot/DEPLOYMENT.md
#   /etc/earshot/earshotd.conf (only if absent), /etc/earshot/earshotd.conf.d/, /etc/earshot/keys.d/
# Units go to the vendor directory, not /etc/systemd/system, so admins' drop-ins and overrides in
# /etc stay theirs and survive reinstalls. With a prefix other than /usr/local or /usr, systemd
# would not look there, so units and snippets go to /etc/systemd/system, /etc/sysusers.d and
# /etc/tmpfiles.d instead, with the binary paths in the units rewritten to the prefix.
set -euo pipefail
cd "$(dirname "$0")/.."

DEST=""
PREFIX=/usr/local
BUILD_DIR=""
ENABLE=0

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "install-system: $*" >&2; exit 1; }
say() { echo "install-system: $*"; }

while [ $# -gt 0 ]; do
  case "$1" in
    --dest|--destdir) [ $# -ge 2 ] || die "$1 needs a directory"; DEST=$2; shift 2 ;;
    --dest=*|--destdir=*) DEST=${1#*=}; shift ;;
    --prefix) [ $# -ge 2 ] || die "$1 needs a directory"; PREFIX=$2; shift 2 ;;
    --prefix=*) PREFIX=${1#*=}; shift ;;
    --build-dir) [ $# -ge 2 ] || die "$1 needs a directory"; BUILD_DIR=$2; shift 2 ;;
    --build-dir=*) BUILD_DIR=${1#*=}; shift ;;
    --enable) ENABLE=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument: $1 (try --help)" ;;
  esac
done

case "$PREFIX" in /*) ;; *) die "--prefix must be absolute: $PREFIX" ;; esac
PREFIX=${PREFIX%/}
if [ -n "$DEST" ]; then
  mkdir -p "$DEST"
  DEST=$(cd "$DEST" && pwd)
  [ "$DEST" != / ] || DEST=""
fi
if [ -z "$DEST" ] && [ "$(id -u)" -ne 0 ]; then
  die "installing into / needs root (or use --dest DIR to stage)"
fi

# ---- Binaries ---------------------------------------------------------------------------------------
if [ -z "$BUILD_DIR" ]; then
  # The first build that has every binary we install (a partial release build, e.g. from the
  # benchmarks, is skipped).
  for candidate in .build/release .build/debug; do
    if [ -x "$candidate/earshotd" ] && [ -x "$candidate/earshot-engine" ] && [ -x "$candidate/earshotctl" ] && [ -x "$candidate/earshot" ]; then BUILD_DIR=$candidate; break; fi
  done
  [ -n "$BUILD_DIR" ] || die "no complete build (earshotd, earshot-engine, earshotctl, earshot) in .build/release or .build/debug: run 'swift build -c release' first"
fi
for tool in earshotd earshot-engine earshotctl; do
  [ -x "$BUILD_DIR/$tool" ] || die "$BUILD_DIR/$tool is missing: build all products first"
done
case "$BUILD_DIR" in *debug*) say "note: installing a DEBUG build from $BUILD_DIR (build with -c release for production)" ;; esac

# The service runs with ProtectHome=yes: a binary whose libraries live under /home or /root (for
# example a Swift toolchain installed per user) would fail to start there.
if command -v ldd >/dev/null; then
  libs=$(ldd "$BUILD_DIR/earshotd" "$BUILD_DIR/earshot-engine" 2>/dev/null || true)
  if grep -q 'not found' <<<"$libs"; then
    say "warning: earshotd has unresolved libraries:"; grep 'not found' <<<"$libs" >&2
  fi
  if grep -Eq '=> (/home|/root|/run/user)/' <<<"$libs"; then
    say "warning: earshotd loads libraries from /home, /root or /run/user, which earshotd.service hides (ProtectHome=yes):"
    grep -E '=> (/home|/root|/run/user)/' <<<"$libs" >&2
  fi
fi

case "$PREFIX" in
  /usr/local|/usr) LIBDIR=$PREFIX/lib; UNIT_DIR=$LIBDIR/systemd/system; SYSUSERS_DIR=$LIBDIR/sysusers.d; TMPFILES_DIR=$LIBDIR/tmpfiles.d ;;
  *) UNIT_DIR=/etc/systemd/system; SYSUSERS_DIR=/etc/sysusers.d; TMPFILES_DIR=/etc/tmpfiles.d ;;
esac
BIN_DIR=$PREFIX/bin
# earshotd's engine process (sherpa-onnx); earshotd finds it at ../libexec/earshot from its own directory.
ENGINE_DIR=$PREFIX/libexec/earshot
DOC_DIR=$PREFIX/share/doc/earshot
CONF_DIR=/etc/earshot

install -d -m 0755 "$DEST$BIN_DIR" "$DEST$UNIT_DIR" "$DEST$SYSUSERS_DIR" "$DEST$TMPFILES_DIR" "$DEST$DOC_DIR"
for tool in earshotd earshotctl earshot; do
  if [ -x "$BUILD_DIR/$tool" ]; then
    # install(1) writes a new file and renames it over the old one, so a running daemon keeps its
    # mapped binary intact.
    install -m 0755 "$BUILD_DIR/$tool" "$DEST$BIN_DIR/$tool"
    say "installed $DEST$BIN_DIR/$tool (from $BUILD_DIR)"
  fi
done
install -d -m 0755 "$DEST$ENGINE_DIR"
install -m 0755 "$BUILD_DIR/earshot-engine" "$DEST$ENGINE_DIR/earshot-engine"
say "installed $DEST$ENGINE_DIR/earshot-engine (from $BUILD_DIR)"

# ---- Units, sysusers/tmpfiles snippets, docs ---------------------------------------------------------
# The shipped files name /usr/local; rewrite only when installing under another prefix.
install_text() { # mode source target
  if [ "$PREFIX" = /usr/local ]; then
    install -m "$1" "$2" "$3"
  else
    sed -e "s|/usr/local/bin/|$BIN_DIR/|g" -e "s|/usr/local/share/doc/earshot|$DOC_DIR|g" "$2" >"$3.tmp.$$"
    chmod "$1" "$3.tmp.$$"
    mv -f "$3.tmp.$$" "$3"
  fi
}
for unit in earshotd.service earshotd.socket earshot-update.service earshot-update.timer; do
  install_text 0644 "systemd/$unit" "$DEST$UNIT_DIR/$unit"
done
install -m 0644 systemd/sysusers.d/earshot.conf "$DEST$SYSUSERS_DIR/earshot.conf"
install -m 0644 systemd/tmpfiles.d/earshot.conf "$DEST$TMPFILES_DIR/earshot.conf"
[ -f Docs/DEPLOYMENT.md ] && install -m 0644 Docs/DEPLOYMENT.md "$DEST$DOC_DIR/DEPLOYMENT.md"
say "installed units in $DEST$UNIT_DIR, sysusers/tmpfiles snippets in $DEST$SYSUSERS_DIR and $DEST$TMPFILES_DIR"

# ---- /etc/earshot: created here too (not only by tmpfiles) so staging trees are complete -----------
install -d -m 0755 "$DEST$CONF_DIR" "$DEST$CONF_DIR/earshotd.conf.d" "$DEST$CONF_DIR/keys.d"
if [ -e "$DEST$CONF_DIR/earshotd.conf" ]; then
  say "kept existing $DEST$CONF_DIR/earshotd.conf (the shipped defaults are in Config/earshotd.conf)"
elif [ -f Config/earshotd.conf ]; then
  install -m 0644 Config/earshotd.conf "$DEST$CONF_DIR/earshotd.conf"
  say "installed $DEST$CONF_DIR/earshotd.conf"
else
  say "warning: Config/earshotd.conf not found; earshotd will run on built-in defaults"
fi

# ---- Apply on the live system -----------------------------------------------------------------------
if [ -n "$DEST" ]; then
  say "staged into $DEST: no users created, nothing reloaded"
  exit 0
fi

# sysusers and tmpfiles edit /etc directly and need no running systemd (useful in image builds and
# containers too); only this package's own snippets are applied.
if command -v systemd-sysusers >/dev/null; then
  systemd-sysusers "$SYSUSERS_DIR/earshot.conf"
  say "ensured users earshot, earshot-update and group earshot-admin (systemd-sysusers)"
else
  say "warning: systemd-sysusers not found; create users earshot, earshot-update and group earshot-admin yourself"
fi
if command -v systemd-tmpfiles >/dev/null; then
  systemd-tmpfiles --create "$TMPFILES_DIR/earshot.conf"
fi

if [ "$(cat /proc/1/comm 2>/dev/null)" = systemd ] && [ -d /run/systemd/system ]; then
  systemctl daemon-reload
  say "reloaded systemd"
  if [ "$ENABLE" -eq 1 ]; then
    systemctl enable --now earshotd.socket earshot-update.timer
    say "enabled earshotd.socket and earshot-update.timer"
  fi
  # Pick up a new binary in a running daemon; a stopped one stays stopped.
  systemctl try-restart earshotd.service
  say "done; next: systemctl enable --now earshotd.socket earshot-update.timer (if not yet enabled)"
else
  say "systemd is not running as PID 1 here: skipped daemon-reload/enable; the units take effect at the next boot under systemd"
  [ "$ENABLE" -eq 0 ] || say "warning: --enable ignored without a running systemd"
fi
