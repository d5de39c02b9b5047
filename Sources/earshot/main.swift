import EarshotClientCommandLine
import Foundation

exit(await UserCLI.main(Array(CommandLine.arguments.dropFirst())))
