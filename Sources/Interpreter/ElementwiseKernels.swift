import Foundation
import GraphIR

/// MIL elementwise ops (iOS15 `elementwise_binary` / `elementwise_unary`, iOS17 `cast`):
/// arithmetic, comparisons and logical ops with numpy broadcasting, unary math, `clip`,
/// `threshold`, `cast`, `identity`, `select`.
///
/// Float dtypes compute in `Float`. When the declared output dtype is an integer and the
/// inputs are integers, arithmetic stays in `Int32` (wrapping, as numpy's int32). Semantics
/// follow coremltools' value inference (numpy): `floor_div` rounds toward −∞, `mod` takes the
/// sign of the divisor (`npy_divmod`), integer division by zero gives 0, `real_div` on integers
/// truncates the quotient toward zero, `maximum`/`minimum`/`clip` propagate NaN, `round` is
/// half-to-even.
enum ElementwiseKernels {
    static let table: [String: Kernel] = [
        // Arithmetic.
        "add": { try arith($0, { $0 + $1 }, { $0 &+ $1 }) },
        "sub": { try arith($0, { $0 - $1 }, { $0 &- $1 }) },
        "mul": { try arith($0, { $0 * $1 }, { $0 &* $1 }) },
        "real_div": realDiv,
        "pow": { try arith($0, { Foundation.pow($0, $1) }, { EW.intPow($0, $1) }) },
        "maximum": { try arith($0, { EW.maxNaN($0, $1) }, { Swift.max($0, $1) }) },
        "minimum": { try arith($0, { EW.minNaN($0, $1) }, { Swift.min($0, $1) }) },
        "floor_div": { try arith($0, { EW.divmod($0, $1).div }, { EW.floorDiv($0, $1) }) },
        "mod": { try arith($0, { EW.divmod($0, $1).mod }, { EW.floorMod($0, $1) }) },
        // Comparisons.
        "equal": { try compare($0, { $0 == $1 }, { $0 == $1 }) },
        "not_equal": { try compare($0, { $0 != $1 }, { $0 != $1 }) },
        "greater": { try compare($0, { $0 > $1 }, { $0 > $1 }) },
        "greater_equal": { try compare($0, { $0 >= $1 }, { $0 >= $1 }) },
        "less": { try compare($0, { $0 < $1 }, { $0 < $1 }) },
        "less_equal": { try compare($0, { $0 <= $1 }, { $0 <= $1 }) },
        // Logical.
        "logical_and": { try logical($0, { $0 && $1 }) },
        "logical_or": { try logical($0, { $0 || $1 }) },
        "logical_xor": { try logical($0, { $0 != $1 }) },
        "logical_not": { inv in
            let x = try inv.tensor("x")
            return [.tensor(Tensor(shape: x.shape, bools: EW.map(x.bools) { !$0 }))]
        },
        // Unary with an integer form.
        "abs": { try unaryInt($0, { Swift.abs($0) }, { $0 == .min ? $0 : Swift.abs($0) }) },
        "sign": { try unaryInt($0, { $0.isNaN ? $0 : ($0 > 0 ? 1 : ($0 < 0 ? -1 : 0)) }, { $0 > 0 ? 1 : ($0 < 0 ? -1 : 0) }) },
        "square": { try unaryInt($0, { $0 * $0 }, { $0 &* $0 }) },
        "exp2": { try unary($0, { Foundation.exp2($0) }) },
        // Unary float.
        "acos": { try unary($0, { Foundation.acos($0) }) },
        "asin": { try unary($0, { Foundation.asin($0) }) },
        "atan": { try unary($0, { Foundation.atan($0) }) },
        "atanh": { try unary($0, { Foundation.atanh($0) }) },
        "cos": { try unary($0, { Foundation.cos($0) }) },
        "cosh": { try unary($0, { Foundation.cosh($0) }) },
        "sin": { try unary($0, { Foundation.sin($0) }) },
        "sinh": { try unary($0, { Foundation.sinh($0) }) },
        "tan": { try unary($0, { Foundation.tan($0) }) },
        "tanh": { try ActivationKernels.unary8($0, { FastExp.tanh8($0) }) },
        "erf": { try unary($0, { Foundation.erf($0) }) },
        "exp": { try ActivationKernels.unary8($0, { FastExp.exp8($0) }) },
        "sqrt": { try ActivationKernels.unary8($0, { $0.squareRoot() }) },
        "ceil": { try unary($0, { $0.rounded(.up) }) },
        "floor": { try unary($0, { $0.rounded(.down) }) },
        "round": { try unary($0, { $0.rounded(.toNearestOrEven) }) },
        // Unary with epsilon (default per MIL, in the dtype of x).
        "rsqrt": { inv in
            let e = try EW.epsilon(inv, default: EW.rsqrtEpsilon)
            return try ActivationKernels.unary8(inv, { EW.rsqrt8($0, e) })
        },
        "inverse": { inv in
            let e = try EW.epsilon(inv, default: EW.inverseEpsilon)
            return try unary(inv, { EW.inverse($0, e) })
        },
        "log": { inv in
            let e = try EW.epsilon(inv, default: .leastNonzeroMagnitude)  // MIL default 1e-45
            return try unary(inv, { Foundation.log($0 + e) })
        },
        "clip": { inv in
            let lo = try inv.float("alpha"), hi = try inv.float("beta")
            return try unary(inv, { EW.clip($0, lo, hi) })
        },
        "threshold": { inv in
            let x = try inv.tensor("x")
            if case .int = x.data, !inv.outputDType().isFloat {
                let a = try inv.tensor("alpha").ints.first ?? 0
                return [.tensor(Tensor(inv.outputDType(), shape: x.shape, ints: EW.map(x.ints) { Swift.max($0, a) }))]
            }
            let a = try inv.float("alpha")
            return try unary(inv, { EW.maxNaN($0, a) })
        },
        "identity": { inv in [try inv.value("x")] },
        "cast": cast,
        "select": select,
    ]

    // MARK: - binary

    /// Integer path when the declared output and both inputs are integers; float otherwise.
    @inline(__always)
    static func arith(_ inv: KernelInvocation, _ ff: (Float, Float) -> Float, _ fi: (Int32, Int32) -> Int32) throws -> [RuntimeValue] {
        let x = try inv.tensor("x"), y = try inv.tensor("y")
        let outType = inv.outputDType()
        if !outType.isFloat, EW.isIntegral(x), EW.isIntegral(y) {
            let r = try Broadcast.binary(x.ints, x.shape, y.ints, y.shape, fi)
            return [.tensor(Tensor(outType, shape: r.shape, ints: r.data))]
        }
        let r = try Broadcast.binary(x.floats, x.shape, y.floats, y.shape, ff)
        return [EW.floatResult(outType, r.shape, r.data)]
    }

    /// `real_div`: integers divide as floats, the quotient truncated toward zero when the output
    /// is an integer (numpy `truediv` then `astype(int32)`).
    static func realDiv(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x"), y = try inv.tensor("y")
        let outType = inv.outputDType()
        if !outType.isFloat, EW.isIntegral(x), EW.isIntegral(y) {
            let r = try Broadcast.binary(x.ints, x.shape, y.ints, y.shape) { a, b in
                EW.toInt32(Double(a) / Double(b))
            }
            return [.tensor(Tensor(outType, shape: r.shape, ints: r.data))]
        }
        let r = try Broadcast.binary(x.floats, x.shape, y.floats, y.shape) { $0 / $1 }
        return [EW.floatResult(outType, r.shape, r.data)]
    }

    @inline(__always)
    static func compare(_ inv: KernelInvocation, _ ff: (Float, Float) -> Bool, _ fi: (Int32, Int32) -> Bool) throws -> [RuntimeValue] {
        let x = try inv.tensor("x"), y = try inv.tensor("y")
        if EW.isIntegral(x), EW.isIntegral(y) {
            let r = try Broadcast.binary(x.ints, x.shape, y.ints, y.shape, fi)
            return [.tensor(Tensor(shape: r.shape, bools: r.data))]
        }
        let r = try Broadcast.binary(x.floats, x.shape, y.floats, y.shape, ff)
        return [.tensor(Tensor(shape: r.shape, bools: r.data))]
    }

    @inline(__always)
    static func logical(_ inv: KernelInvocation, _ f: (Bool, Bool) -> Bool) throws -> [RuntimeValue] {
        let x = try inv.tensor("x"), y = try inv.tensor("y")
        let r = try Broadcast.binary(x.bools, x.shape, y.bools, y.shape, f)
        return [.tensor(Tensor(shape: r.shape, bools: r.data))]
    }

    // MARK: - unary

    /// Float unary op; an integer output (e.g. `exp2` on int32) takes the truncated result.
    @inline(__always)
    static func unary(_ inv: KernelInvocation, _ f: (Float) -> Float) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        return [EW.floatResult(inv.outputDType(), x.shape, EW.map(x.floats, f))]
    }

    @inline(__always)
    static func unaryInt(_ inv: KernelInvocation, _ ff: (Float) -> Float, _ fi: (Int32) -> Int32) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        let outType = inv.outputDType()
        if !outType.isFloat, EW.isIntegral(x) {
            return [.tensor(Tensor(outType, shape: x.shape, ints: EW.map(x.ints, fi)))]
        }
        return [EW.floatResult(outType, x.shape, EW.map(x.floats, ff))]
    }

    // MARK: - cast, select

    /// MIL `cast(x, dtype)`: as numpy `astype` (coremltools' value inference). Float → integer
    /// truncates toward zero; NaN / out-of-range give `Int32.min` for int32, and for the narrower
    /// types the low bits of the int64 conversion (what numpy does on x86-64). Integers narrow by
    /// wrapping. Anything nonzero (NaN included) is `true`. Without `dtype`, the op's declared
    /// output dtype is the target. Float targets are not rounded here: the plan rounds fp16
    /// outputs under `Precision.fp16` (Core ML's CPU path holds fp16 values in fp32).
    static func cast(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        let target: DType
        if inv.has("dtype") {
            let s = try inv.string("dtype")
            guard let d = EW.castDTypes[s] else {
                throw KernelError("cast: unsupported dtype '\(s)' (supported: \(EW.castDTypes.keys.sorted().joined(separator: ", ")))")
            }
            target = d
        } else {
            target = inv.outputDType()
        }
        if target.isFloat {
            let f: [Float]
            switch x.data {
            case let .float(a): f = a
            case let .int(a): f = EW.map(a) { Float($0) }
            case let .bool(a): f = EW.map(a) { $0 ? 1 : 0 }
            case .string: throw KernelError("cast: string input is not supported")
            }
            return [.tensor(Tensor(target, shape: x.shape, floats: f))]
        }
        if target == .bool {
            let b: [Bool]
            switch x.data {
            case let .float(a): b = EW.map(a) { $0 != 0 }
            case let .int(a): b = EW.map(a) { $0 != 0 }
            case let .bool(a): b = a
            case .string: throw KernelError("cast: string input is not supported")
            }
            return [.tensor(Tensor(shape: x.shape, bools: b))]
        }
        let narrow: (Int64) -> Int32
        switch target {
        case .int8: narrow = { Int32(Int8(truncatingIfNeeded: $0)) }
        case .uint8: narrow = { Int32(UInt8(truncatingIfNeeded: $0)) }
        case .int16: narrow = { Int32(Int16(truncatingIfNeeded: $0)) }
        case .uint16: narrow = { Int32(UInt16(truncatingIfNeeded: $0)) }
        default: narrow = { Int32(truncatingIfNeeded: $0) }
        }
        let out: [Int32]
        switch x.data {
        case let .float(a):
            if target == .int32 || target == .int64 || target == .uint32 {
                out = EW.map(a) { EW.toInt32(Double($0)) }
            } else {
                out = EW.map(a) { narrow(EW.toInt64($0)) }
            }
        case let .int(a):
            out = target == .int32 ? a : EW.map(a) { narrow(Int64($0)) }
        case let .bool(a):
            out = EW.map(a) { $0 ? 1 : 0 }
        case .string:
            throw KernelError("cast: string input is not supported")
        }
        return [.tensor(Tensor(target, shape: x.shape, ints: out))]
    }

    /// MIL `select(cond, a, b)`: `cond ? a : b` with all three broadcast.
    static func select(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let c = try inv.tensor("cond"), a = try inv.tensor("a"), b = try inv.tensor("b")
        let outType = inv.outputDType()
        let cond = c.bools
        if outType == .bool {
            let r = try Broadcast.ternary(cond, c.shape, a.bools, a.shape, b.bools, b.shape) { $0 ? $1 : $2 }
            return [.tensor(Tensor(shape: r.shape, bools: r.data))]
        }
        if !outType.isFloat, EW.isIntegral(a), EW.isIntegral(b) {
            let r = try Broadcast.ternary(cond, c.shape, a.ints, a.shape, b.ints, b.shape) { $0 ? $1 : $2 }
            return [.tensor(Tensor(outType, shape: r.shape, ints: r.data))]
        }
        let r = try Broadcast.ternary(cond, c.shape, a.floats, a.shape, b.floats, b.shape) { $0 ? $1 : $2 }
        return [EW.floatResult(outType, r.shape, r.data)]
    }
}

/// Shared helpers of the elementwise / activation / reduction / normalization kernels.
enum EW {
    /// Integer or bool storage.
    @inline(__always)
    static func isIntegral(_ t: Tensor) -> Bool {
        switch t.data {
        case .int, .bool: return true
        default: return false
        }
    }

    /// A float result under `outType`; an integer `outType` takes numpy's `astype(int32)`.
    static func floatResult(_ outType: DType, _ shape: [Int], _ data: [Float]) -> RuntimeValue {
        if outType.isFloat { return .tensor(Tensor(outType, shape: shape, floats: data)) }
        if outType == .bool { return .tensor(Tensor(shape: shape, bools: map(data) { $0 != 0 })) }
        return .tensor(Tensor(outType, shape: shape, ints: map(data) { toInt32(Double($0)) }))
    }

    @inline(__always)
    static func map<T, R>(_ a: [T], _ f: (T) -> R) -> [R] {
        let n = a.count
        return BufferPool.build(n) { po in
            a.withUnsafeBufferPointer { p in
                let pa = p.baseAddress!
                for i in 0..<n { (po + i).initialize(to: f(pa[i])) }
            }
        }
    }

    /// numpy `astype(int32)` of a float on x86-64: truncation toward zero; NaN and values
    /// outside the int32 range give `Int32.min`.
    @inline(__always)
    static func toInt32(_ x: Double) -> Int32 {
        guard x.isFinite, x > -2_147_483_649, x < 2_147_483_648 else { return .min }
        return Int32(x)
    }

    /// numpy float → int64 on x86-64 (NaN / out of range → `Int64.min`).
    @inline(__always)
    static func toInt64(_ x: Float) -> Int64 {
        guard x.isFinite, x >= -9.223372e18, x < 9.223372e18 else { return .min }
        return Int64(x)
    }

    /// numpy `maximum`: NaN if either is NaN.
    @inline(__always)
    static func maxNaN(_ a: Float, _ b: Float) -> Float {
        a.isNaN ? a : (b.isNaN ? b : (a > b ? a : b))
    }

    @inline(__always)
    static func minNaN(_ a: Float, _ b: Float) -> Float {
        a.isNaN ? a : (b.isNaN ? b : (a < b ? a : b))
    }

    /// numpy's `npy_divmod`: floor division and the remainder with the divisor's sign.
    @inline(__always)
    static func divmod(_ a: Float, _ b: Float) -> (div: Float, mod: Float) {
        var mod = a.truncatingRemainder(dividingBy: b)
        if b == 0 { return (a / b, mod) }
        var div = (a - mod) / b
        if mod != 0 {  // NaN counts as nonzero, as in C
            if (b < 0) != (mod < 0) {
                mod += b
                div -= 1
            }
        } else {
            mod = Float(signOf: b, magnitudeOf: 0)
        }
        var floordiv: Float
        if div != 0 {
            floordiv = div.rounded(.down)
            if div - floordiv > 0.5 { floordiv += 1 }
        } else {
            floordiv = Float(signOf: a / b, magnitudeOf: 0)
        }
        return (floordiv, mod)
    }

    /// numpy int floor division: toward −∞; division by zero gives 0.
    @inline(__always)
    static func floorDiv(_ a: Int32, _ b: Int32) -> Int32 {
        if b == 0 { return 0 }
        if b == -1 { return 0 &- a }
        let q = a / b
        return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q
    }

    /// numpy int remainder: the sign of the divisor; modulo zero gives 0.
    @inline(__always)
    static func floorMod(_ a: Int32, _ b: Int32) -> Int32 {
        if b == 0 || b == -1 { return 0 }
        let r = a % b
        return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r
    }

    /// Integer power with wrapping; negative exponents truncate 1/x^|e| toward zero.
    @inline(__always)
    static func intPow(_ base: Int32, _ e: Int32) -> Int32 {
        if e < 0 {
            if base == 1 { return 1 }
            if base == -1 { return e & 1 == 0 ? 1 : -1 }
            return 0
        }
        var result: Int32 = 1, b = base, k = e
        while k > 0 {
            if k & 1 == 1 { result = result &* b }
            b = b &* b
            k >>= 1
        }
        return result
    }

    /// The `epsilon` input, or the MIL default held in the dtype of `x` (an fp16 `x` rounds
    /// the default to fp16, so `log`'s 1e-45 is 0 there, as coremltools materializes it).
    /// In `fp16` precision an op on an fp16 `x` applies an explicit epsilon in fp16 too, as the
    /// GPU / Neural Engine do: coremltools stores `log`'s 1e-45 as an fp32 const beside an fp16
    /// `x`, which is 0 on the device, so the log of an underflowed probability is −inf there
    /// (coremltools#2728). The default fp32 precision keeps the fp32 value (Core ML's CPU path).
    static func epsilon(_ inv: KernelInvocation, default d: Float, input: String = "x") throws -> Float {
        let dt = (try? inv.tensor(input).dtype) ?? .fp32
        if inv.has("epsilon") {
            let e = try inv.float("epsilon")
            return inv.precision == .fp16 && dt == .fp16 ? Half.toFloat(Half.fromFloat(e)) : e
        }
        return defaultEpsilon(d, dtype: dt)
    }

    /// The MIL default epsilon `d` in the dtype of x (fp16-rounded for an fp16 x).
    static func defaultEpsilon(_ d: Float, dtype: DType) -> Float { dtype == .fp16 ? Half.toFloat(Half.fromFloat(d)) : d }

    /// MIL defaults of `rsqrt` and `inverse`'s epsilon.
    static let rsqrtEpsilon: Float = 1e-12
    static let inverseEpsilon: Float = 1e-4

    /// `rsqrt`: 1 / √(x + ε), eight lanes at a time.
    @inline(__always)
    static func rsqrt8(_ x: SIMD8<Float>, _ e: Float) -> SIMD8<Float> { 1 / (x + e).squareRoot() }

    /// `inverse`: 1 / (x + ε).
    @inline(__always)
    static func inverse(_ x: Float, _ e: Float) -> Float { 1 / (x + e) }

    /// `clip`: min(max(x, α), β), NaN propagated.
    @inline(__always)
    static func clip(_ x: Float, _ lo: Float, _ hi: Float) -> Float { minNaN(maxNaN(x, lo), hi) }

    /// `relu`: max(x, 0) (NaN kept).
    @inline(__always)
    static func relu(_ x: Float) -> Float { x < 0 ? 0 : x }

    /// `cast` dtype strings (MIL iOS17).
    static let castDTypes: [String: DType] = [
        "fp16": .fp16, "fp32": .fp32, "fp64": .fp64, "int8": .int8, "uint8": .uint8, "int16": .int16,
        "uint16": .uint16, "int32": .int32, "bool": .bool,
    ]
}
