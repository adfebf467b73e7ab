import GraphIR
import Interpreter

/// Provider mode of a per-layer embedding table (Gemma 3n / Gemma 4 conversions that keep the
/// table off the graph): the host maps the quantized table and, for every call, feeds the
/// dequantized rows of the call's token ids as a graph input (`per_layer_raw` [1, S, C] fp16).
/// Only the rows of the tokens seen are ever read, so resident memory grows by those rows.
///
/// Declared in the contract file (README "Static inputs and table providers"):
/// `"provider": {"input": "per_layer_raw", "table": FILE, "scale": FILE, "rows_by": "input_ids"}`.
///
/// - `table`: [rows, C] `int8`, or `int4` (raw file `FILE:int4:rows,C`, two values a byte, low
///   nibble first), or fp16 / fp32 (no scale needed).
/// - `scale`: fp32 or fp16, [rows] or [rows, 1] (one scale per row) or [rows, C / B] (one per
///   block of B columns); optional for float tables.
/// - Row r of the input is `table[id_r, j] · scale[id_r, j / B]`, in fp32, then converted to
///   the input's dtype as Core ML converts inputs (fp16: rounded once).
public final class TableRowProvider {
    /// What a contract file says (paths resolved against the contract file's folder).
    public struct Spec: Equatable {
        public var input: String
        public var table: String
        public var scale: String?
        /// The token-id input whose values pick the rows.
        public var rowsBy: String
        public init(input: String, table: String, scale: String?, rowsBy: String) {
            self.input = input
            self.table = table
            self.scale = scale
            self.rowsBy = rowsBy
        }
    }

    public let input: String
    public let rowsBy: String
    public let table: MappedArray
    public let scale: MappedArray?
    public let rows: Int
    public let columns: Int
    /// Columns per scale (C for one scale per row).
    public let blockSize: Int

    /// Maps the spec's files.
    /// - Throws: `NPYError` for a file that cannot be mapped, `GenerationError` when the table
    ///   is not [rows, C] of a supported dtype or the scale's shape fits neither one scale per
    ///   row nor one per block of columns.
    public convenience init(_ spec: Spec) throws {
        try self.init(input: spec.input, table: MappedArray(spec: spec.table),
                      scale: try spec.scale.map { try MappedArray(spec: $0) }, rowsBy: spec.rowsBy)
    }

    public init(input: String, table: MappedArray, scale: MappedArray?, rowsBy: String) throws {
        guard table.shape.count == 2, table.shape[1] > 0, [.int8, .int4, .fp16, .fp32].contains(table.dtype) else {
            throw GenerationError("provider for '\(input)': the table \(table) must be int8, int4, fp16 or fp32 [rows, columns], columns ≥ 1")
        }
        self.input = input
        self.rowsBy = rowsBy
        self.table = table
        self.scale = scale
        rows = table.shape[0]
        columns = table.shape[1]
        if let s = scale {
            guard s.dtype == .fp32 || s.dtype == .fp16 else {
                throw GenerationError("provider for '\(input)': the scale \(s) must be fp32 or fp16")
            }
            let perRow = s.shape == [rows] || s.shape == [rows, 1]
            if perRow {
                blockSize = columns
            } else if s.shape.count == 2, s.shape[0] == rows, s.shape[1] > 0, columns % s.shape[1] == 0 {
                blockSize = columns / s.shape[1]
            } else {
                throw GenerationError("provider for '\(input)': the scale \(s) fits the table \(table) neither per row ([\(rows)]) nor per block ([\(rows), C / block] with the block dividing \(columns))")
            }
        } else {
            guard table.dtype.isFloat else {
                throw GenerationError("provider for '\(input)': the \(table.dtype.rawValue) table \(table.path) needs a \"scale\" file")
            }
            blockSize = columns
        }
    }

    /// Checks that function `f` takes the input as [1, S, C] or [1, C] floats and has the
    /// `rows_by` input.
    /// - Throws: `GenerationError` naming the input and both shapes.
    public func check(against f: Function) throws {
        guard let v = f.inputs.first(where: { $0.name == input }), let t = v.type.tensorType else {
            throw GenerationError("provider: function '\(f.name)' has no tensor input '\(input)' (inputs: \(f.inputs.filter { !$0.type.isState }.map(\.name).joined(separator: ", ")))")
        }
        guard f.inputs.contains(where: { $0.name == rowsBy }) else {
            throw GenerationError("provider for '\(input)': \"rows_by\" '\(rowsBy)' is not an input of function '\(f.name)'")
        }
        guard t.dtype.isFloat, t.rank == 2 || t.rank == 3, t.shape.last?.fixedValue == columns else {
            throw GenerationError("provider for '\(input)': function '\(f.name)' declares \(t), the table \(table) gives [1, S, \(columns)] float rows")
        }
    }

    /// The input's value for a call on token ids `ids` (padding ids included): [1, S, C] (or
    /// [1, C] for a rank-2 input), fp32 values the plan converts to the input's dtype.
    /// - Throws: `GenerationError` for an id outside the table's rows.
    public func value(ids: [Int32], for f: Function) throws -> Tensor {
        let rank = f.inputs.first { $0.name == input }?.type.tensorType?.rank ?? 3
        var out = [Float](repeating: 0, count: ids.count * columns)
        let blocks = columns / blockSize
        for (k, raw) in ids.enumerated() {
            let r = Int(raw)
            guard r >= 0, r < rows else {
                throw GenerationError("provider for '\(input)': token id \(raw) is outside the table's \(rows) rows (\(table.path))")
            }
            let base = r * columns
            for j in 0..<columns {
                let q = table.float(at: base + j)
                out[k * columns + j] = scale.map { q * $0.float(at: r * blocks + j / blockSize) } ?? q
            }
        }
        let shape = rank == 2 ? [ids.count, columns] : [1, ids.count, columns]
        return Tensor(.fp32, shape: shape, floats: out)
    }
}
