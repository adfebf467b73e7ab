/// The kernel tables of each op family; ``KernelRegistry`` merges them.
/// Add a family here when adding a kernel file.
enum KernelFamilies {
    static let all: [[String: Kernel]] = [
        ConstexprKernels.table,
        StateKernels.table,
    ]
}
