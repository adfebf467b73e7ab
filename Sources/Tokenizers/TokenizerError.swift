import Foundation

/// Why a `tokenizer.json` could not be used. Every case names the file.
public enum TokenizerError: Error, Equatable, CustomStringConvertible {
    /// The file could not be read, or is not JSON.
    case unreadable(file: String, reason: String)
    /// The JSON does not have the shape of a Hugging Face `tokenizer.json` (`path` is a JSON path
    /// such as `model.merges[12]`).
    case malformed(file: String, path: String, reason: String)
    /// A component this implementation does not support (a model type, a pre-tokenizer, a
    /// normalizer, a decoder, a post-processor, an option value).
    case unsupported(file: String, path: String, what: String)
    /// A token string (a chat template's stop token, a template's special token) that the
    /// tokenizer does not have.
    case unknownToken(file: String, token: String)

    public var description: String {
        switch self {
        case let .unreadable(file, reason):
            return "\(file): cannot read tokenizer: \(reason)"
        case let .malformed(file, path, reason):
            return "\(file): malformed tokenizer.json at \(path.isEmpty ? "top level" : path): \(reason)"
        case let .unsupported(file, path, what):
            return "\(file): unsupported \(what)\(path.isEmpty ? "" : " (at \(path))")"
        case let .unknownToken(file, token):
            return "\(file): token \(String(reflecting: token)) is not in the vocabulary"
        }
    }
}
