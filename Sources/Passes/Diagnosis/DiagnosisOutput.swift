import GraphIR
import JSON

extension Diagnosis {
    /// Version of the JSON document below; bump on incompatible changes.
    public static let jsonSchemaVersion = 1

    /// The `forge-ir diagnose --json` document (keys sorted, 2-space indent):
    ///
    /// ```
    /// {
    ///   "schema": 1,
    ///   "model": "<path>",
    ///   "functions": [{
    ///     "name": "main",
    ///     "symbols": [{                       // one per flexible dimension, after merging
    ///       "name": "input_ids_1",            // first member's <input>_<axis>
    ///       "members": ["input_ids[1]", "causal_mask[2]", "position_ids[1]"],
    ///       "constraint": "RangeDim(1..64)",  // or "Enumerated(1|16|32)", "?"
    ///       "sequence": true                  // the symbol --seq sets
    ///     }],
    ///     "bindings": [{                      // every binding evaluated
    ///       "binding": {"input_ids_1": 1},
    ///       "ok": true,
    ///       "error": null | "<first shape error>",
    ///       "ops_evaluated": 412
    ///     }],
    ///     "skipped": [{                       // bindings no call of the model's contract has
    ///       "binding": {"causalMask_3": 1, "inputIds_1": 64},
    ///       "reason": "the state write offset causalMask_3 - inputIds_1 of '…' would be -63: …"
    ///     }]
    ///   }],
    ///   "findings": [{                        // errors first, then warnings, then infos
    ///     "severity": "error" | "warning" | "info",
    ///     "code": "shape_error" | "zero_dimension" | "cast_overflow" | "index_out_of_range"
    ///           | "slice_update_rank" | "squeeze_flexible" | "broadcast_size1"
    ///           | "declared_type_mismatch" | "state_write_runtime_end" | "state_output_alias"
    ///           | "state_description_mismatch" | "enumerated_shapes_with_state"
    ///           | "range_lower_bound_zero" | "flexible_constraint_mismatch"
    ///           | "binding_out_of_range" | "sequence_fixed" | "fp16_square_in_norm"
    ///           | "fp16_constant_out_of_range" | "fp16_log_softmax" | "shape_unknown"
    ///           | <every code of `Catalogue.patterns`>
    ///           | "fp16_overflow" | "s1_mismatch",   // the last two: runtime checks (see "runs")
    ///     "function": "main" | null,
    ///     "op": {"name": "…", "type": "slice_update", "index": 123} | null,  // index: position in the body
    ///     "binding": {"input_ids_1": 16} | null,   // first binding that breaks; null: every binding / not shape-related
    ///     "bindings": [{"input_ids_1": 16}, …],     // every evaluated binding that breaks
    ///     "shapes": [{"name": "x", "dtype": "fp16", "shape": [1, 2, null, 16],   // ShapeNote: null = symbolic
    ///                 "text": "tensor<fp16, [1, 2, input_ids_1, 16]>",        // as the text output prints it
    ///                 "value": [0, 0, null, 0],                               // only: contents of a slice bound
    ///                 "flexibility": "RangeDim(1..64)"}, …],                  // only: an input's declaration
    ///     "message": "what goes wrong",
    ///     "fix": {"pass": "lower_slice_update" | null,   // the forge-ir pass that fixes it
    ///             "available": true,                   // false: the pass is planned, not registered yet
    ///             "hint": "how to fix it"}
    ///   }],
    ///   "runs": [{                            // runtime checks run (--precision fp16, --dynamic); [] when none
    ///     "check": "fp16_overflow" | "s1_mismatch",
    ///     "function": "main",
    ///     "precision": "fp16" | "fp32",
    ///     "inputs": "prefill of 16 random token ids (seed 0)",   // the calls, in words
    ///     "ok": true,                         // false: the check produced its finding
    ///     "summary": "no op overflows in fp16 (…); largest |value| 2.3e4 (op '…', add), fp16 max 65504"
    ///   }],
    ///   "summary": {"errors": 4, "warnings": 0, "infos": 5}
    /// }
    /// ```
    public func json(modelPath: String) -> JSONValue {
        func binding(_ b: [String: Int]) -> JSONValue { .object(b.mapValues { .int($0) }) }
        let fns: [JSONValue] = functions.map { f in
            .object([
                "name": .string(f.name),
                "symbols": .array(f.symbols.map { s in
                    .object([
                        "name": .string(s.name),
                        "members": .array(s.members.map { .string($0.description) }),
                        "constraint": .string(s.constraintText),
                        "sequence": .bool(s.name == f.sequenceSymbol),
                    ])
                }),
                "bindings": .array(f.results.map { r in
                    .object([
                        "binding": binding(r.binding),
                        "ok": .bool(r.error == nil),
                        "error": r.error.map { .string($0) } ?? .null,
                        "ops_evaluated": .int(r.opsEvaluated),
                    ])
                }),
                "skipped": .array(f.skipped.map { .object(["binding": binding($0.binding), "reason": .string($0.reason)]) }),
            ])
        }
        let fs: [JSONValue] = findings.map { f in
            .object([
                "severity": .string(f.severity.rawValue),
                "code": .string(f.code),
                "function": f.function.map { .string($0) } ?? .null,
                "op": f.op.map { .object(["name": .string($0.name), "type": .string($0.type), "index": .int($0.index)]) } ?? .null,
                "binding": f.binding.map(binding) ?? .null,
                "bindings": .array(f.bindings.map(binding)),
                "shapes": .array(f.shapes.map(\.json)),
                "message": .string(f.message),
                "fix": .object([
                    "pass": f.fixPass.map { .string($0) } ?? .null,
                    "available": .bool(f.fixPass.map { PassRegistry.pass(named: $0) != nil } ?? false),
                    "hint": .string(f.fix),
                ]),
            ])
        }
        return .object([
            "schema": .int(Diagnosis.jsonSchemaVersion),
            "model": .string(modelPath),
            "functions": .array(fns),
            "findings": .array(fs),
            "runs": .array(runs.map { r in
                .object([
                    "check": .string(r.check), "function": .string(r.function), "precision": .string(r.precision),
                    "inputs": .string(r.inputs), "ok": .bool(r.ok), "summary": .string(r.summary),
                ])
            }),
            "summary": .object(["errors": .int(errorCount), "warnings": .int(warningCount), "infos": .int(infoCount)]),
        ])
    }

    /// Human-readable report.
    public func text(modelPath: String) -> String {
        var out = "diagnose: \(modelPath)\n"
        for f in functions {
            out += "\nfunction \(f.name)\n"
            if f.symbols.isEmpty {
                out += "  flexible dimensions: none\n"
            } else {
                for s in f.symbols {
                    out += "  symbol \(s.name) = \(s.members.map(\.description).joined(separator: " = ")) : \(s.constraintText)"
                    out += (s.name == f.sequenceSymbol ? "  (sequence, --seq)" : "") + "\n"
                }
            }
            let parts = f.results.map { r in "\(describeBinding(r.binding)) \(r.error == nil ? "ok" : "FAILS")" }
            if !parts.isEmpty { out += "  shapes inferred at: " + parts.joined(separator: " · ") + "\n" }
            if let first = f.skipped.first {
                out += "  not evaluated (outside the model's contract: \(first.reason)): "
                    + f.skipped.map { describeBinding($0.binding) }.joined(separator: " · ") + "\n"
            }
        }
        if !runs.isEmpty {
            out += "\nruntime checks\n"
            for r in runs {
                out += "  \(r.check) \(r.function) (\(r.precision); \(r.inputs)): \(r.ok ? "ok" : "FAILS") — \(r.summary)\n"
            }
        }
        out += "\n"
        // A finding repeated on several ops (same code, severity, function, fix and bindings)
        // prints once, with the count and the op list; --json keeps every one.
        var groups: [[Finding]] = []
        var groupOf: [String: Int] = [:]
        for f in findings {
            let key = [f.severity.rawValue, f.code, f.function ?? "", f.fixPass ?? "", f.fix,
                       f.bindings.map(describeBinding).joined(separator: ";")].joined(separator: "|")
            if let g = groupOf[key] { groups[g].append(f) } else { groupOf[key] = groups.count; groups.append([f]) }
        }
        for g in groups {
            let f = g[0]
            var head = "\(f.severity.rawValue)[\(f.code)]"
            if let fn = f.function { head += " \(fn)" }
            let ops = g.compactMap(\.op)
            if g.count > 1 {
                head += ": \(g.count)×"
                if !ops.isEmpty {
                    let list = ops.prefix(8).map { "'\($0.name)' (\($0.type), #\($0.index))" }.joined(separator: ", ")
                    head += " on ops " + list + (ops.count > 8 ? ", … (\(ops.count) ops)" : "")
                }
            } else if let op = f.op { head += ": op '\(op.name)' (\(op.type), #\(op.index))" }
            out += head + "\n"
            if let b = f.binding {
                let all = f.bindings.count > 1 ? " (also: " + f.bindings.dropFirst().map(describeBinding).joined(separator: "; ") + ")" : ""
                out += "  at \(describeBinding(b))\(all)\n"
            } else if !f.bindings.isEmpty {
                out += "  at every binding (" + f.bindings.map(describeBinding).joined(separator: "; ") + ")\n"
            }
            out += "  " + f.message + (g.count > 1 ? " (first of \(g.count); --json lists each)" : "") + "\n"
            let shapes = g.count > 1 && ops.isEmpty ? g.flatMap(\.shapes) : f.shapes
            if !shapes.isEmpty { out += "  shapes: " + shapes.map(\.text).joined(separator: ", ") + "\n" }
            if let p = f.fixPass, PassRegistry.pass(named: p) != nil {
                out += "  fix: forge-ir optimize MODEL -o OUT.mlpackage --passes \(p)" + (f.fix.isEmpty ? "" : " — \(f.fix)") + "\n"
            } else if let p = f.fixPass {
                out += "  fix: \(f.fix) (pass \(p): planned, not available yet)\n"
            } else if !f.fix.isEmpty {
                out += "  fix: \(f.fix)\n"
            }
        }
        for h in hints { out += "hint: \(h)\n" }
        out += "\(errorCount) error\(errorCount == 1 ? "" : "s"), \(warningCount) warning\(warningCount == 1 ? "" : "s"), \(infoCount) note\(infoCount == 1 ? "" : "s")\n"
        return out
    }
}
