#ifndef EARSHOT_CCRYPTO_SHIM_H
#define EARSHOT_CCRYPTO_SHIM_H
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/opensslv.h>
#endif
