import Foundation
import GraphIR

/// MIL tensor lists (iOS15 `control_flow`: `make_list`, `list_length`, `list_write`,
/// `list_read`, `list_gather`, `list_scatter`), values of type `list<T, length>` that
/// `while_loop` carries. Source: the MIL op reference
/// (`coremltools.converters.mil.mil.ops.defs.iOS15.control_flow`).
///
/// A list is held as a ``RuntimeValue/list(_:)`` of its element tensors; an element never
/// written reads as zeros of the list's element shape (`make_list.elem_shape`, or the shape of
/// the elements written so far when that is symbolic).
/// - `make_list(init_length = 1, dynamic_length = true, elem_shape, dtype = "fp32")`.
/// - `list_write(ls, index, value)`: a new list with `value` at `index`; the list grows (with
///   unwritten elements) when `index` ≥ its length (`dynamic_length` is not enforced).
/// - `list_read(ls, index)`, `list_gather(ls, indices)` → [len(indices), *elem_shape],
///   `list_scatter(ls, indices, value [N, *elem_shape])`, `list_length(ls)` → int32 scalar.
enum ListKernels {
    static let table: [String: Kernel] = [
        "make_list": makeList,
        "list_length": listLength,
        "list_write": listWrite,
        "list_read": listRead,
        "list_gather": listGather,
        "list_scatter": listScatter,
    ]

    /// An unwritten element: the list's element dtype and static shape, no values yet.
    static func placeholder(_ dtype: DType, _ shape: [Int]?) -> RuntimeValue {
        .tuple([.tensor(Tensor(dtype, shape: shape ?? [], floats: [])), .tensor(Tensor.scalar(shape == nil ? 0 : 1))])
    }

    static func items(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        guard case let .list(vs) = try inv.value("ls") else { throw KernelError("\(inv.op.type): ls is not a list") }
        return vs
    }

    /// The dense element at `i`: written tensors as they are, unwritten ones as zeros of the
    /// element shape (taken from a written element when the declared shape is symbolic).
    static func element(_ vs: [RuntimeValue], _ i: Int, op: String) throws -> Tensor {
        guard i >= 0, i < vs.count else { throw KernelError("\(op): index \(i) out of range for a list of length \(vs.count)") }
        if case let .tensor(t) = vs[i] { return t }
        guard case let .tuple(p) = vs[i], case let .tensor(proto) = p[0], case let .tensor(known) = p[1] else {
            throw KernelError("\(op): element \(i) is not a tensor")
        }
        if known.floats.first == 1 { return Tensor.zeros(proto.dtype, shape: proto.shape) }
        for v in vs { if case let .tensor(t) = v { return Tensor.zeros(proto.dtype, shape: t.shape) } }
        throw KernelError("\(op): element \(i) was never written and the list's element shape is not static")
    }

    static func makeList(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let n = try inv.int("init_length", default: 1)
        guard n >= 0, n <= 1 << 24 else { throw KernelError("make_list: init_length \(n) must be in 0...\(1 << 24)") }
        let dtName = try inv.string("dtype", default: "fp32")
        guard let dt = EW.castDTypes[dtName] else { throw KernelError("make_list: dtype '\(dtName)' is not a tensor dtype") }
        var shape: [Int]? = nil
        if let vs = inv.all("elem_shape") {
            let dims = try vs.flatMap { try $0.dense().ints.map(Int.init) }
            if dims.allSatisfy({ $0 >= 0 }) { shape = dims }
        }
        // A declared list type with a static element shape wins (elem_shape may be symbolic).
        if shape == nil, case let .list(t, _)? = inv.op.outputs.first?.type, let tt = t.tensorType, let s = tt.fixedShape { shape = s }
        return [.list([RuntimeValue](repeating: placeholder(dt, shape), count: n))]
    }

    static func listLength(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        [.tensor(Tensor.scalar(Int32(try items(inv).count)))]
    }

    static func listWrite(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        var vs = try items(inv)
        let i = try inv.int("index")
        let value = try inv.tensor("value")
        guard i >= 0, i <= 1 << 24 else { throw KernelError("list_write: index \(i) out of range") }
        if i >= vs.count {
            let filler = vs.first.flatMap { v -> RuntimeValue? in if case .tuple = v { return v } else { return nil } }
                ?? placeholder(value.dtype, value.shape)
            vs += [RuntimeValue](repeating: filler, count: i + 1 - vs.count)
        }
        vs[i] = .tensor(value)
        return [.list(vs)]
    }

    static func listRead(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        [.tensor(try element(try items(inv), try inv.int("index"), op: "list_read"))]
    }

    static func listGather(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let vs = try items(inv)
        let idx = try inv.ints("indices")
        let parts = try idx.map { try element(vs, $0, op: "list_gather") }
        let dtype = parts.first?.dtype ?? inv.outputDType()
        let shape = parts.first?.shape ?? {
            if case let .list(t, _)? = inv.op.operand("ls")?.type, let s = t.tensorType?.fixedShape { return s }
            return []
        }()
        for p in parts where p.shape != shape { throw KernelError("list_gather: elements have shapes \(shape) and \(p.shape)") }
        let data: TensorData
        if dtype.isFloat { data = .float(parts.flatMap(\.floats)) } else if dtype == .bool { data = .bool(parts.flatMap(\.bools)) } else { data = .int(parts.flatMap(\.ints)) }
        return [.tensor(Tensor(dtype: dtype, shape: [idx.count] + shape, data: data))]
    }

    static func listScatter(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        var vs = try items(inv)
        let idx = try inv.ints("indices")
        let value = try inv.tensor("value")
        guard value.rank >= 1, value.shape[0] == idx.count else {
            throw KernelError("list_scatter: value has shape \(value.shape), expected [\(idx.count), …] (one row per index)")
        }
        let elem = Array(value.shape.dropFirst()), n = elem.reduce(1, *)
        for (k, i) in idx.enumerated() {
            guard i >= 0, i <= 1 << 24 else { throw KernelError("list_scatter: index \(i) out of range") }
            if i >= vs.count {
                let filler = vs.first.flatMap { v -> RuntimeValue? in if case .tuple = v { return v } else { return nil } }
                    ?? placeholder(value.dtype, elem)
                vs += [RuntimeValue](repeating: filler, count: i + 1 - vs.count)
            }
            let data: TensorData
            switch value.data {
            case let .float(a): data = .float(Array(a[(k * n)..<((k + 1) * n)]))
            case let .int(a): data = .int(Array(a[(k * n)..<((k + 1) * n)]))
            case let .bool(a): data = .bool(Array(a[(k * n)..<((k + 1) * n)]))
            case let .string(a): data = .string(Array(a[(k * n)..<((k + 1) * n)]))
            }
            vs[i] = .tensor(Tensor(dtype: value.dtype, shape: elem, data: data))
        }
        return [.list(vs)]
    }
}
