import CKernels
import Foundation
import GraphIR
@testable import Interpreter
import TestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// ``StateBuffer`` storage (binary16 bits for fp16, Float for fp32, tensors otherwise), the C
/// binary16 conversions behind it, residency of never-written slots, and ``StateStore``.
final class StateBufferTests: XCTestCase {
    override func tearDown() {
        fk_set_simd_level(-1)
        super.tearDown()
    }

    /// A deterministic stream of 32-bit patterns.
    struct Bits {
        var state: UInt64
        mutating func next() -> UInt32 {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return UInt32(truncatingIfNeeded: state >> 29)
        }
    }

    /// Floats that probe every rounding case: random bit patterns (NaNs, subnormals, huge), every
    /// binary16 value, its float neighbours and the exact midpoints to the next one (ties).
    static let probes: [Float] = {
        var out: [Float] = [0, -0, .infinity, -.infinity, .nan, -.nan, 65504, 65519.996, 65520, -65520, 65536,
                            5.9604645e-8, 2.9802322e-8, 2.9802326e-8, 8.940697e-8, 6.097555e-5, 6.1035156e-5,
                            Float(bitPattern: 0x7F80_0001), Float(bitPattern: 0xFFC0_1234), .leastNonzeroMagnitude,
                            .greatestFiniteMagnitude]
        var g = Bits(state: 42)
        for _ in 0..<200_000 { out.append(Float(bitPattern: g.next())) }
        for h in 0..<0x7C00 {
            let f = Half.toFloat(UInt16(h)), next = Half.toFloat(UInt16(h + 1))
            out += [f, f.nextUp, f.nextDown, Float((Double(f) + Double(next)) / 2)]
            out += [-f, -(f.nextUp), -Float((Double(f) + Double(next)) / 2)]
        }
        return out
    }()

    func forEachLevel(_ body: (Int32) throws -> Void) rethrows {
        for level: Int32 in [0, 1] {
            fk_set_simd_level(level)
            try body(level)
        }
        fk_set_simd_level(-1)
    }

    /// Both bodies (portable, F16C) agree with GraphIR's `Half` bit for bit, and with
    /// `Rounding.toHalf` (the rounding fp16 states had before).
    func testBinary16ConversionsMatchHalfAndRounding() {
        let probes = Self.probes
        var rounded = probes
        Rounding.toHalf(&rounded)
        forEachLevel { level in
            var bits = [UInt16](repeating: 0, count: probes.count)
            fk_float_to_half(probes, &bits, probes.count)
            var bad = 0
            for (i, f) in probes.enumerated() where bits[i] != Half.fromFloat(f) {
                if bad < 5 { XCTFail("level \(level): \(f) (0x\(String(f.bitPattern, radix: 16))) → 0x\(String(bits[i], radix: 16)), Half gives 0x\(String(Half.fromFloat(f), radix: 16))") }
                bad += 1
            }
            XCTAssertEqual(bad, 0, "level \(level): float → half mismatches")
            var back = [Float](repeating: 0, count: probes.count)
            fk_half_to_float(bits, &back, bits.count)
            let roundBad = zip(back, rounded).filter { $0.bitPattern != $1.bitPattern }.count
            XCTAssertEqual(roundBad, 0, "level \(level): half bits widened differ from Rounding.toHalf")

            let all = (0...0xFFFF).map { UInt16($0) }
            var wide = [Float](repeating: 0, count: all.count)
            fk_half_to_float(all, &wide, all.count)
            // A signalling NaN may come back quiet (F16C quiets it); fp16 states never hold one,
            // their bits come from fk_float_to_half, which always sets the quiet bit.
            let wideBad = all.filter { h in
                let want = Half.toFloat(h).bitPattern, got = wide[Int(h)].bitPattern
                return got != want && !(want & 0x7F80_0000 == 0x7F80_0000 && got == want | 0x0040_0000)
            }
            XCTAssertEqual(wideBad, [], "level \(level): half → float mismatches")
            XCTAssertTrue(bits.filter { $0 & 0x7C00 == 0x7C00 && $0 & 0x3FF != 0 }.allSatisfy { $0 & 0x200 != 0 },
                          "level \(level): a NaN stored as binary16 is quiet")
            // Odd lengths take the scalar tails.
            var tail = [Float](repeating: 0, count: 13)
            fk_half_to_float(Array(all[0x3C00..<0x3C0D]), &tail, 13)
            XCTAssertEqual(tail, (0x3C00..<0x3C0D).map { Half.toFloat(UInt16($0)) })
        }
        XCTAssertEqual(fk_attention_simd_level() >= 0, true)
    }

    func testFP16StateHoldsBinary16Bits() throws {
        let s = try StateBuffer(name: "k", type: TensorType(.fp16, fixed: [2, 3]))
        guard case let .half(p) = s.storage else { return XCTFail("fp16 state not stored as binary16") }
        XCTAssertEqual(s.shape, [2, 3])
        XCTAssertEqual(s.count, 6)
        XCTAssertEqual(s.tensor().dtype, .fp16)
        XCTAssertEqual(s.tensor().shape, [2, 3])
        XCTAssertEqual(s.tensor().floats, [0, 0, 0, 0, 0, 0])
        // Ties to even, overflow to inf, underflow to -0, NaN.
        let x: [Float] = [1 + 1.0 / 2048, 1 + 3.0 / 2048, 70000, -1e-8, .nan, 0.1]
        try s.write(Tensor(.fp32, shape: [2, 3], floats: x))
        var want = x
        Rounding.toHalf(&want)
        XCTAssertEqual(s.tensor().floats.map(\.bitPattern), want.map(\.bitPattern))
        XCTAssertEqual(p[0], 0x3C00)
        XCTAssertEqual(p[1], 0x3C02)
        XCTAssertEqual(p[2], 0x7C00)
        XCTAssertEqual(p[3], 0x8000)
        XCTAssertEqual(s.shape, [2, 3])
        XCTAssertEqual(s.tensor().floats.map(\.bitPattern), want.map(\.bitPattern))
        s.reset()
        XCTAssertEqual(s.tensor().floats, [0, 0, 0, 0, 0, 0])
        // Integer data is converted.
        try s.write(Tensor(.int32, shape: [2, 3], ints: [1, 2, 3, -4, 5, 2049]))
        XCTAssertEqual(s.tensor().floats, [1, 2, 3, -4, 5, 2048])
    }

    func testFP32StateKeepsFloats() throws {
        let s = try StateBuffer(name: "acc", type: TensorType(.fp32, fixed: [4]))
        guard case .float = s.storage else { return XCTFail("fp32 state not stored as Float") }
        let x: [Float] = [0.1, -3.25, Float(bitPattern: 0x0001_1170), .infinity]
        try s.write(Tensor(.fp32, shape: [4], floats: x))
        XCTAssertEqual(s.tensor().floats.map(\.bitPattern), x.map(\.bitPattern))
        XCTAssertEqual(s.tensor().dtype, .fp32)
        s.reset()
        XCTAssertEqual(s.tensor().floats, [0, 0, 0, 0])
    }

    func testOtherDTypesKeepTensors() throws {
        let i = try StateBuffer(name: "n", type: TensorType(.int32, fixed: [3]))
        guard case .tensor = i.storage else { return XCTFail("int32 state should be a tensor") }
        try i.write(Tensor(.fp32, shape: [3], floats: [1.7, -2.2, 3]))
        XCTAssertEqual(i.tensor().ints, [1, -2, 3])
        XCTAssertEqual(i.tensor().dtype, .int32)
        i.reset()
        XCTAssertEqual(i.tensor().ints, [0, 0, 0])
        let b = try StateBuffer(name: "flag", type: TensorType(.bool, fixed: [2]))
        try b.write(Tensor(.int32, shape: [2], ints: [0, 5]))
        XCTAssertEqual(b.tensor().bools, [false, true])
        let bf = try StateBuffer(name: "bf", type: TensorType(.bf16, fixed: [1]))
        try bf.write(Tensor(.fp32, shape: [1], floats: [1 + 1.0 / 256 + 1.0 / 512]))
        XCTAssertEqual(bf.tensor().floats, [1 + 1.0 / 128])
        let empty = try StateBuffer(name: "e", type: TensorType(.fp16, fixed: [0, 4]))
        XCTAssertEqual(empty.tensor().count, 0)
        empty.reset()
    }

    func testBadWritesThrowAndLeaveTheStateAlone() throws {
        let s = try StateBuffer(name: "k", type: TensorType(.fp16, fixed: [2, 2]))
        try s.write(Tensor(.fp32, shape: [2, 2], floats: [1, 2, 3, 4]))
        XCTAssertThrowsError(try s.write(Tensor(.fp32, shape: [4], floats: [9, 9, 9, 9]))) { XCTAssertTrue($0 is KernelError) }
        XCTAssertThrowsError(try s.write(Tensor(dtype: .string, shape: [2, 2], data: .string(["a", "b", "c", "d"])))) {
            XCTAssertTrue($0 is KernelError)
        }
        XCTAssertThrowsError(try s.store([1, 2, 3], count: 3, at: 2)) { XCTAssertTrue($0 is KernelError) }
        XCTAssertThrowsError(try s.store([1], count: 1, at: -1)) { XCTAssertTrue($0 is KernelError) }
        XCTAssertEqual(s.tensor().floats, [1, 2, 3, 4])
        let i = try StateBuffer(name: "n", type: TensorType(.int32, fixed: [1]))
        XCTAssertThrowsError(try i.store([1], count: 1, at: 0)) { XCTAssertTrue($0 is KernelError) }
        XCTAssertThrowsError(try StateBuffer(name: "f", type: TensorType(.fp16, [.fixed(1), .unknown]))) { e in
            guard case .badState = e as? InterpreterError else { return XCTFail("\(e)") }
        }
        XCTAssertThrowsError(try StateBuffer(name: "huge", type: TensorType(.fp16, fixed: [1 << 40, 1 << 40]))) { e in
            guard case .badState = e as? InterpreterError else { return XCTFail("\(e)") }
        }
        XCTAssertThrowsError(try StateBuffer(name: "unmappable", type: TensorType(.fp32, fixed: [1 << 61]))) { e in
            guard case .badState = e as? InterpreterError else { return XCTFail("\(e)") }
        }
    }

    #if os(Linux)
    /// Resident pages of `s`'s storage (mincore).
    func residentPages(_ s: StateBuffer) -> Int {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let base: UnsafeMutableRawPointer
        let bytes: Int
        switch s.storage {
        case let .half(p): base = UnsafeMutableRawPointer(p); bytes = s.count * 2
        case let .float(p): base = UnsafeMutableRawPointer(p); bytes = s.count * 4
        case .tensor: return -1
        }
        let pages = (bytes + page - 1) / page
        var vec = [UInt8](repeating: 0, count: pages)
        guard mincore(base, bytes, &vec) == 0 else { return -1 }
        return vec.filter { $0 & 1 != 0 }.count
    }

    /// A 2048-slot fp16 cache: writing one slot makes one page resident; reset hands it back
    /// without touching the others.
    func testUnwrittenSlotsStayNonResident() throws {
        let s = try StateBuffer(name: "kv", type: TensorType(.fp16, fixed: [1, 3, 2048, 64]))
        XCTAssertEqual(residentPages(s), 0)
        let row = [Float](repeating: 0.5, count: 64)
        try s.store(row, count: 64, at: (1 * 2048 + 100) * 64)
        XCTAssertEqual(residentPages(s), 1)
        guard case let .half(p) = s.storage else { return XCTFail() }
        XCTAssertEqual(p[(1 * 2048 + 100) * 64 + 63], 0x3800)
        s.reset()
        XCTAssertEqual(residentPages(s), 0)
        XCTAssertEqual(p[(1 * 2048 + 100) * 64 + 63], 0)
        XCTAssertTrue(s.tensor().floats.allSatisfy { $0 == 0 })
    }
    #endif

    func stateFunction() -> Function {
        let b = ProgramBuilder()
        let k = b.input("k", .state(.tensor(.fp16, [2, 4])))
        let acc = b.input("acc", .state(.tensor(.fp32, [3])))
        let n = b.input("n", .state(.tensor(.int32, [2])))
        let x = b.input("x", .tensor(.fp32, [3]))
        let r = b.apply("read_state", ["input": acc], .tensor(.fp32, [3]))
        let y = b.apply("add", ["x": r, "y": x], .tensor(.fp32, [3]))
        b.op("write_state", ["input": acc, "data": y], nil)
        _ = (k, n)
        return b.function(outputs: [y])
    }

    func testStateStoreSavesAndLoadsNPY() throws {
        let f = stateFunction()
        let store = try StateStore(function: f)
        XCTAssertEqual(store.names, ["k", "acc", "n"])
        XCTAssertEqual(store.byteCount, 8 * 2 + 3 * 4 + 2 * 4)
        try store.buffers["k"]!.write(Tensor(.fp32, shape: [2, 4], floats: [1, 2, 3, 0.1, -5, 6, 7, 65504]))
        try store.buffers["acc"]!.write(Tensor(.fp32, shape: [3], floats: [0.1, 0.2, 0.3]))
        try store.buffers["n"]!.write(Tensor(.int32, shape: [2], ints: [7, -1]))
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("statebuffer-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try store.save(to: dir)
        XCTAssertEqual(try NPY.read(path: dir + "/k.npy").dtype, .fp16)
        let back = try StateStore(function: f)
        try back.load(from: dir)
        for name in store.names {
            XCTAssertEqual(back.buffers[name]!.tensor().floats.map(\.bitPattern), store.buffers[name]!.tensor().floats.map(\.bitPattern), name)
        }
        // A file of the wrong shape is refused; the state keeps its values.
        try NPY.write(Tensor(.fp32, shape: [4], floats: [1, 2, 3, 4]), path: dir + "/acc.npy")
        XCTAssertThrowsError(try back.load(from: dir)) { e in
            guard case let .badState(function, name, _) = e as? InterpreterError else { return XCTFail("\(e)") }
            XCTAssertEqual(function, f.name, "the error names the function (was '')")
            XCTAssertEqual(name, "acc")
        }
        XCTAssertEqual(back.buffers["acc"]!.tensor().floats, store.buffers["acc"]!.tensor().floats)
        back.reset()
        XCTAssertEqual(back.buffers["k"]!.tensor().floats, [Float](repeating: 0, count: 8))
        // The plan accepts the store's buffers and updates the fp32 state in place.
        let plan = try ExecutionPlan(function: f)
        _ = try plan.run(inputs: ["x": Tensor(.fp32, shape: [3], floats: [1, 1, 1])], states: back.buffers)
        _ = try plan.run(inputs: ["x": Tensor(.fp32, shape: [3], floats: [1, 1, 1])], states: back.buffers)
        XCTAssertEqual(back.buffers["acc"]!.tensor().floats, [2, 2, 2])
    }

    /// A state too large to count keeps its own reason (it was reported as "not static").
    func testStateStoreKeepsTheReason() throws {
        let b = ProgramBuilder()
        let x = b.input("x", .tensor(.fp32, [1]))
        _ = b.input("huge", .state(.tensor(.fp16, [1 << 40, 1 << 40])))
        let f = b.function(outputs: [x])
        XCTAssertThrowsError(try StateStore(function: f)) { e in
            guard case let .badState(function, name, reason) = e as? InterpreterError else { return XCTFail("\(e)") }
            XCTAssertEqual(function, f.name)
            XCTAssertEqual(name, "huge")
            XCTAssertTrue(reason.contains("too many elements"), reason)
        }
    }
}
