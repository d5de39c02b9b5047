// `import Earshot` brings what `import Speech` (Foundation) and the AVFoundation/CoreMedia types
// Speech code uses bring on Apple platforms.
@_exported import EarshotAVFoundation
@_exported import Foundation
