import CPocketSphinx
import Foundation

/// A C `argv` (program name first) whose array and strings live as long as this object, as
/// `cmd_ln_parse_r` requires: the `cmd_ln_t` it returns keeps pointing into them.
final class PocketSphinxArgumentVector {
    let count: Int32
    let pointer: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>

    init(_ arguments: [String]) {
        count = Int32(arguments.count)
        pointer = .allocate(capacity: arguments.count + 1)
        for (index, argument) in arguments.enumerated() { pointer[index] = strdup(argument) }
        pointer[arguments.count] = nil
    }

    deinit {
        for index in 0..<Int(count) { free(pointer[index]) }
        pointer.deallocate()
    }
}
