/// The kernel tables of each op family; ``KernelRegistry`` merges them.
/// Add a family here when adding a kernel file.
enum KernelFamilies {
    static let all: [[String: Kernel]] = [
        ConstexprKernels.table,
        MatmulKernels.table, ConvKernels.table,
        ElementwiseKernels.table, ActivationKernels.table, ReductionKernels.table, NormKernels.table,
        StateKernels.table,
        ShapeKernels.table, ShapeKernels.spaceTable, IndexKernels.table,
        RecurrentKernels.table, QuantizationKernels.table, ImageResizeKernels.table,
        RandomKernels.table, ListKernels.table, DetectionKernels.table, ClassifyKernels.table,
    ]
}
