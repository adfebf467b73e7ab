/// Tensor lists (MIL iOS15 `control_flow` list ops), carried through `while_loop`: list values,
/// not tensors, so their declared types are used. Kernels: `Interpreter/ListKernels.swift`.
extension OpDefs {
    static func declareLists(_ b: inout OpTableBuilder) {
        b.family = .list
        // Tensor lists (iOS15 control_flow), carried through while_loop.
        b.add(OpSchema("make_list", [opt("init_length", .integer), opt("dynamic_length", .bool), InputSpec("elem_shape", optional: true, variadic: true), opt("dtype", .string)]),
              declaredTypeOnly: "a list value: the declared type is used")
        b.add(OpSchema("list_length", [req("ls")]),
              declaredTypeOnly: "a scalar int32 (run-time list length)")
        b.add(OpSchema("list_write", [req("ls"), req("index", .integer), req("value")]),
              declaredTypeOnly: "a list value: the declared type is used")
        b.add(OpSchema("list_read", [req("ls"), req("index", .integer)]),
              declaredTypeOnly: "the element type of a list: the declared type is used")
        b.add(OpSchema("list_gather", [req("ls"), req("indices", .integer)]),
              declaredTypeOnly: "the element type of a list: the declared type is used")
        b.add(OpSchema("list_scatter", [req("ls"), req("indices", .integer), req("value")]),
              declaredTypeOnly: "a list value: the declared type is used")
    }
}
