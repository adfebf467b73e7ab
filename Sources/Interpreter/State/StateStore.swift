import Foundation
import GraphIR


/// The state buffers of one function, living across calls (a KV cache across prefill and
/// decode). Buffers start zeroed, as Core ML initialises states; they can be reset, and saved
/// to / loaded from a folder of `<state_name>.npy` files so shell users can chain calls.
///
/// Memory: fp16 states take 2 bytes an element, fp32 states 4, in zero-filled pages that become
/// resident only once written (see ``StateBuffer``); ``reset()`` releases them again.
public final class StateStore {
    public private(set) var buffers: [String: StateBuffer] = [:]
    /// State names in function-input order.
    public let names: [String]
    /// The function whose states these are (for error messages).
    public let functionName: String

    /// One zeroed buffer per `state<tensor<…>>` input of `function`.
    /// - Throws: `InterpreterError.badState` naming the function and state: a shape that is not
    ///   static, an element count that overflows, or memory that cannot be mapped.
    public init(function: Function) throws {
        var names: [String] = []
        for v in function.stateInputs {
            guard let t = v.type.stateWrappedTensor else { continue }
            do { buffers[v.name] = try StateBuffer(name: v.name, type: t) } catch let InterpreterError.badState(_, _, reason) {
                throw InterpreterError.badState(function: function.name, name: v.name, reason: reason)
            }
            names.append(v.name)
        }
        self.names = names
        functionName = function.name
    }

    /// Zeroes every buffer (their pages stop being resident).
    public func reset() { for b in buffers.values { b.reset() } }

    /// Total bytes the states hold in their own dtype (the size of their storage; how much of
    /// it is resident depends on the slots written so far).
    public var byteCount: Int {
        buffers.values.reduce(0) { $0 + $1.dtype.byteCount(elements: $1.count) }
    }

    /// Writes `<dir>/<name>.npy` for every state (fp16 states as `<f2`). Creates `dir`. Each
    /// state is widened to a temporary tensor while it is written.
    /// - Throws: file-system errors, `NPYError`.
    public func save(to dir: String) throws {
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        for name in names {
            try NPY.write(buffers[name]!.tensor(), path: dir + "/" + name + ".npy")
        }
    }

    /// Loads `<dir>/<name>.npy` for every state; a state without a file stays as it is, but a
    /// folder holding none of the states' files is refused (it is almost always the wrong
    /// folder, e.g. an `--out` folder). A file whose dtype is wider than the state's (fp32 or
    /// int32 data for an fp16 state, fp64 for fp32) would be rounded: refused unless
    /// `allowLossy` (then rounded and reported through `warn`).
    /// - Returns: warnings naming the states missing from the folder and the `.npy` files in
    ///   it that are no state's.
    /// - Throws: `NPYError` for a missing folder, a folder without any state file, an
    ///   unreadable file or a lossy conversion; `InterpreterError.badState` for a shape or
    ///   dtype mismatch (string data).
    @discardableResult
    public func load(from dir: String, allowLossy: Bool = false, warn: (String) -> Void = { _ in }) throws -> [String] {
        var isDir: ObjCBool = false
        guard FileManager.default.fileExists(atPath: dir, isDirectory: &isDir), isDir.boolValue else {
            throw NPYError(dir, "state folder does not exist")
        }
        let present = names.filter { FileManager.default.fileExists(atPath: dir + "/" + $0 + ".npy") }
        if present.isEmpty && !names.isEmpty {
            throw NPYError(dir, "holds none of the state files (\(names.prefix(3).map { $0 + ".npy" }.joined(separator: ", "))\(names.count > 3 ? ", …" : "")); is it the folder --state-out wrote?")
        }
        var warnings: [String] = []
        let missing = names.filter { !present.contains($0) }
        if !missing.isEmpty {
            warnings.append("\(dir): no file for state(s) \(missing.joined(separator: ", ")); they start from zeros")
        }
        let known = Set(names.map { $0 + ".npy" })
        let others = ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).filter { !known.contains($0) }.sorted()
        if !others.isEmpty {
            warnings.append("\(dir): ignoring file(s) that are no state of function '\(functionName)': \(others.prefix(8).joined(separator: ", "))\(others.count > 8 ? ", …" : "")")
        }
        for name in present {
            let path = dir + "/" + name + ".npy"
            let buf = buffers[name]!
            let data: Data
            do { data = try SafeFile.read(path) } catch let f as SafeFile.Failure { throw NPYError(path, f.reason) }
            if let stored = NPY.storedDType(data), StateStore.isLossy(from: stored, to: buf.dtype) {
                let text = "\(stored.rawValue) data for \(buf.dtype.rawValue) state '\(name)' would be rounded"
                guard allowLossy else { throw NPYError(path, "\(text); write it as \(buf.dtype.rawValue), or pass --allow-lossy-inputs to convert anyway") }
                warnings.append("\(path): \(text) (converted: --allow-lossy-inputs)")
            }
            let t = try NPY.decode(data, name: path, target: buf.dtype, allowLossy: allowLossy, warn: { warnings.append($0) })
            guard t.shape == buf.shape else {
                throw InterpreterError.badState(function: functionName, name: name, reason: "\(path) has shape \(t.shape), the state is \(buf.shape)")
            }
            do { try buf.write(t) } catch let e as KernelError {
                throw InterpreterError.badState(function: functionName, name: name, reason: "\(path): \(e.reason)")
            }
        }
        for w in warnings { warn(w) }
        return warnings
    }

    /// True when `from` data cannot be held in a `to` state without changing values.
    static func isLossy(from: DType, to: DType) -> Bool {
        if from == to { return false }
        switch to {
        case .fp16: return from != .int8 && from != .uint8   // fp32, fp64, int16+ need rounding
        case .fp32: return from == .fp64 || from == .int32 || from == .int64 || from == .uint32 || from == .uint64
        case .int32: return from.isFloat || from == .int64 || from == .uint32 || from == .uint64
        default: return false
        }
    }
}
