import Foundation
import GraphIR
@testable import Interpreter
import TestSupport
import XCTest

/// Buffer planning: after a warm-up, a decode call of a stateful model takes every kernel
/// output from the plan's pool (no new tensor storage per op), and recycling never changes
/// results.
final class BufferPoolTests: XCTestCase {
    /// Runs the torch reference calls of `name` (prefill, then decode), checking on the later
    /// decode calls that no kernel output was allocated.
    func steadyState(_ name: String, tolerance: Float = 1e-2, file: StaticString = #filePath, line: UInt = #line) throws {
        let model = try ModelLoader.load(path: Fixtures.modelsDir + name + ".mlpackage")
        let ref = try NPZ.read(path: Fixtures.modelsDir + "reference/" + name + "_run.npz")
        let session = try Session(model: model)
        session.plan.pool.tracking = true
        let calls = ref.keys.filter { $0.hasSuffix("_logits") }.count
        XCTAssertGreaterThanOrEqual(calls, 4, file: file, line: line)
        for k in 0..<calls {
            session.plan.pool.resetStats()
            let out = try session.predict(try LLMInputs.recorded(ref, call: k))
            let stats = session.plan.pool.stats
            // Results stay those of torch (recycled buffers never leak old values).
            let want = try XCTUnwrap(ref["call\(k)_logits"])
            let err = zip(try XCTUnwrap(out["logits"]).floats, want.floats).map { abs($0 - $1) }.max() ?? .nan
            XCTAssertLessThanOrEqual(err, tolerance, "\(name) call \(k)", file: file, line: line)
            session.plan.recycle(out)
            if k >= 3 {
                // Calls 1 and 2 warm the decode sizes; from call 3 on nothing is allocated.
                XCTAssertEqual(stats.misses, 0, "\(name) call \(k): new buffers for \(stats.missesByOp)", file: file, line: line)
                XCTAssertEqual(stats.foreign, 0, "\(name) call \(k): outputs allocated outside the pool by \(stats.foreignByOp)", file: file, line: line)
                XCTAssertGreaterThan(stats.hits, 20, "\(name) call \(k): \(stats)", file: file, line: line)
            }
        }
    }

    func testTinyLlamaFP16DecodeAllocatesNothing() throws { try steadyState("tiny_llama_fp16") }
    func testTinyLlamaInt8DecodeAllocatesNothing() throws { try steadyState("tiny_llama_int8") }
    func testDynamicEndDecodeAllocatesNothing() throws { try steadyState("tiny_llama_dynamic_end") }
    /// Logits of magnitude ~70, returned as fp16 (spacing 0.03–0.06 there): the tolerance
    /// allows that rounding and the fp16 KV cache.
    func testSmolLM2TwinDecodeAllocatesNothing() throws { try steadyState("smollm2_twin_int8", tolerance: 0.05) }

    /// A recycled buffer still shared with a live value is copied before a kernel writes into
    /// it (and counted as a miss), so the live value keeps its contents.
    func testSharedBufferIsNotOverwritten() throws {
        let pool = BufferPool()
        let live: [Float] = [1, 2, 3, 4]
        pool.recycle(.tensor(Tensor(shape: [4], floats: live)))
        let taken: [Float] = pool.installed {
            var a: [Float] = BufferPool.uninitialized(4)
            a.withUnsafeMutableBufferPointer { for i in 0..<4 { $0[i] = 9 } }
            return a
        }
        XCTAssertEqual(live, [1, 2, 3, 4])
        XCTAssertEqual(taken, [9, 9, 9, 9])
        XCTAssertEqual(pool.stats.misses, 1)
        XCTAssertEqual(pool.stats.hits, 0)
    }

    /// A unique recycled buffer is reused (same storage); idle sizes are kept up to the idle
    /// budget and dropped beyond it.
    func testReuseAndTrim() throws {
        let pool = BufferPool()
        var base: UnsafeRawPointer?
        pool.installed {
            let a: [Float] = BufferPool.uninitialized(8)
            base = a.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress!) }
            pool.recycle(.tensor(Tensor(shape: [8], floats: a)))
        }
        XCTAssertEqual(pool.freeBytes, 32)
        pool.installed {
            let b: [Float] = BufferPool.uninitialized(8)
            XCTAssertEqual(b.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress!) }, base)
            pool.recycle(.tensor(Tensor(shape: [8], floats: b)))
        }
        XCTAssertEqual(pool.stats.hits, 1)
        XCTAssertEqual(pool.stats.misses, 1)
        pool.endRun()  // size 8 was used this run: kept
        XCTAssertEqual(pool.freeBytes, 32)
        pool.idleBudgetBytes = 32
        pool.endRun()  // idle, within the idle budget: kept
        XCTAssertEqual(pool.freeBytes, 32)
        pool.idleBudgetBytes = 16
        pool.endRun()  // idle beyond the budget: dropped
        XCTAssertEqual(pool.freeBytes, 0)
    }

    /// By default a size no run asked for is dropped at the end of the next run (a prefill's
    /// wide buffers do not stay resident through decode).
    func testDefaultDropsIdleSizes() {
        let pool = BufferPool()
        XCTAssertEqual(pool.idleBudgetBytes, 0)
        pool.installed {
            let a: [Float] = BufferPool.uninitialized(1 << 19)  // 2 MiB: past the trim threshold
            pool.recycle(.tensor(Tensor(shape: [1 << 19], floats: a)))
        }
        pool.endRun()  // asked for this run: kept
        XCTAssertEqual(pool.freeBytes, 2 << 20)
        pool.endRun()  // idle: dropped (and the heap trimmed)
        XCTAssertEqual(pool.freeBytes, 0)
    }

    /// The same plan run from several threads at once: runs take turns on the plan's pool and
    /// constant caches (no crash, every result that of a serial run).
    func testConcurrentRunsOfOnePlan() throws {
        let model = try ModelLoader.load(path: Fixtures.modelsDir + "mixed_dtypes.mlpackage")
        let inputs = try NPZ.read(path: Fixtures.modelsDir + "inputs/mixed_dtypes.npz")
        let plan = try ExecutionPlan(function: model.program.function(named: model.defaultFunctionName)!)
        let want = try plan.run(inputs: inputs)
        let bad = UnsafeMutablePointer<Int>.allocate(capacity: 1)
        bad.initialize(to: 0)
        defer { bad.deallocate() }
        let lock = NSLock()
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            for _ in 0..<100 {
                let got = try? plan.run(inputs: inputs)
                var ok = got != nil
                if let got { for (k, v) in want where got[k]?.floats != v.floats && got[k]?.ints != v.ints { ok = false } }
                if !ok { lock.lock(); bad.pointee += 1; lock.unlock() }
            }
        }
        XCTAssertEqual(bad.pointee, 0, "concurrent runs gave wrong results")
    }
}
