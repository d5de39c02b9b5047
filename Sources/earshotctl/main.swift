import EarshotControlCommandLine
import Foundation

exit(await ControlCLI.main(Array(CommandLine.arguments.dropFirst())))
