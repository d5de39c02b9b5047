import EarshotDaemon
import Foundation

let status = await DaemonCLI.main(Array(CommandLine.arguments.dropFirst()))
// Sessions cancelled at the shutdown deadline may still be inside an engine call on their own
// threads; exit(3) would run C++ static destructors (ONNX Runtime's schema registry) under them and
// abort. Everything the daemon owns is closed and its log flushed by now: leave without them.
fflush(nil) // every C stdio stream
_exit(status)
