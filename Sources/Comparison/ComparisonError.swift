/// A comparison that cannot be carried out as asked (e.g. a carried cache output one side does
/// not return); `description` is the one-line reason.
public struct ComparisonError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
