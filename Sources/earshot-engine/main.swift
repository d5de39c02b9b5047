import EarshotEngine
import EarshotSystem
import Foundation

// earshotd's engine process: serves the link on standard input (a socket earshotd passes it) and
// exits when earshotd closes it. `--version` prints the engine libraries as JSON.
if CommandLine.arguments.dropFirst().first == "--version" {
    let data = (try? JSONEncoder().encode(EngineLibraries.linked)) ?? Data()
    print(String(decoding: data, as: UTF8.self))
    exit(0)
}
guard CommandLine.arguments.count == 1 else {
    FileHandle.standardError.write(Data("usage: earshot-engine [--version] (started by earshotd, linked on standard input)\n".utf8))
    exit(2)
}
WorkerProcess.closeInheritedDescriptors()
MemoryReclaim.keepLargeBlocksReturnable(above: EngineServer.mmapThreshold)
if let failure = EngineServer(fd: 0).run() {
    FileHandle.standardError.write(Data("earshot-engine: the link to earshotd broke: \(failure)\n".utf8))
    exit(1)
}
exit(0)
