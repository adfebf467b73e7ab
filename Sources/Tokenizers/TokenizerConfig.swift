import Foundation
import JSON

/// What `apply_chat_template` takes from a Hugging Face tokenizer folder: the chat template(s)
/// and the special tokens of `tokenizer_config.json` (with `chat_template.jinja` beside it
/// taking precedence, as transformers saves templates since 4.47), and the end-of-sequence ids of
/// `generation_config.json` when there is one.
///
/// `chat_template` is a string, or a list of `{"name", "template"}` objects (transformers turns
/// the list into a dict; `default` is used unless a name is asked for). Special tokens are strings
/// or AddedToken objects (`{"content": …}`).
public struct TokenizerConfig: Equatable, Sendable {
    /// The file the config was read from (error messages, template names).
    public var file: String
    /// Template name → Jinja source; a single template is named `default`.
    public var chatTemplates: [String: String]
    /// `bos_token`, `eos_token`, `unk_token`, `pad_token`, `sep_token`, `cls_token`,
    /// `mask_token` as set (transformers passes the set ones to the template).
    public var specialTokens: [String: String]
    /// `additional_special_tokens`.
    public var additionalSpecialTokens: [String]
    /// `eos_token_id` of `generation_config.json` (an int or a list), when present.
    public var generationEOSIds: [Int]

    public init(file: String = "tokenizer_config.json", chatTemplates: [String: String] = [:], specialTokens: [String: String] = [:],
                additionalSpecialTokens: [String] = [], generationEOSIds: [Int] = []) {
        self.file = file
        self.chatTemplates = chatTemplates
        self.specialTokens = specialTokens
        self.additionalSpecialTokens = additionalSpecialTokens
        self.generationEOSIds = generationEOSIds
    }

    static let specialKeys = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"]

    /// Parses the contents of a `tokenizer_config.json`.
    /// - Throws: `TokenizerError.unreadable` / `.malformed` naming `file` and the JSON path.
    public init(data: Data, file: String) throws {
        let root = try JSONNode.parse(Array(data), file: file)
        guard root.value?.objectValue != nil else { throw root.malformed("expected a JSON object") }
        self.init(file: file)
        let t = root["chat_template"]
        if t.exists {
            if let s = t.value?.stringValue {
                chatTemplates["default"] = s
            } else {
                for item in try t.array() {
                    chatTemplates[try item["name"].string()] = try item["template"].string()
                }
            }
        }
        func token(_ n: JSONNode) throws -> String? {
            guard n.exists else { return nil }
            if let s = n.value?.stringValue { return s }
            return try n["content"].string()
        }
        for k in Self.specialKeys {
            if let v = try token(root[k]) { specialTokens[k] = v }
        }
        if root["additional_special_tokens"].exists {
            additionalSpecialTokens = try root["additional_special_tokens"].array().compactMap(token)
        }
    }

    /// Reads `tokenizer_config.json` (and `chat_template.jinja`, `generation_config.json` from
    /// the same folder).
    /// - Throws: `TokenizerError` naming the file.
    public init(path: String) throws {
        try self.init(data: try TokenizerFile.read(path), file: path)
        let dir = (path as NSString).deletingLastPathComponent
        let jinja = (dir as NSString).appendingPathComponent("chat_template.jinja")
        if FileManager.default.fileExists(atPath: jinja) {
            guard let text = String(data: try TokenizerFile.read(jinja), encoding: .utf8) else {
                throw TokenizerError.unreadable(file: jinja, reason: "not UTF-8 text")
            }
            chatTemplates["default"] = text
        }
        let gen = (dir as NSString).appendingPathComponent("generation_config.json")
        if let d = try? TokenizerFile.read(gen), let eos = (try? JSONValue.parse(bytes: d))?["eos_token_id"] {
            // (ids outside a token id's range are no ids: the file is optional, read leniently)
            let ids = eos.intValue.map { [$0] } ?? eos.arrayValue?.compactMap(\.intValue) ?? []
            generationEOSIds = ids.filter { (0...JSONNode.maxTokenID).contains($0) }
        }
    }

    /// The `tokenizer_config.json` next to a `tokenizer.json`, if there is one.
    public static func beside(tokenizerFile: String) throws -> TokenizerConfig? {
        let dir = (tokenizerFile as NSString).deletingLastPathComponent
        let path = (dir as NSString).appendingPathComponent("tokenizer_config.json")
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        return try TokenizerConfig(path: path)
    }

    /// The template transformers would use: `name` if given, else `default` (a single string
    /// template is `default`).
    /// - Throws: `TokenizerError.malformed` when `name` is missing or several templates exist
    ///   without a `default`.
    public func chatTemplateSource(named name: String? = nil) throws -> (name: String, source: String)? {
        if let name {
            guard let s = chatTemplates[name] else {
                throw TokenizerError.malformed(file: file, path: "chat_template",
                                               reason: "no template named '\(name)' (templates: \(chatTemplates.keys.sorted().joined(separator: ", ")))")
            }
            return (name, s)
        }
        if chatTemplates.isEmpty { return nil }
        if let s = chatTemplates["default"] { return ("default", s) }
        throw TokenizerError.malformed(file: file, path: "chat_template",
                                       reason: "several chat templates and none named 'default' (templates: \(chatTemplates.keys.sorted().joined(separator: ", ")))")
    }
}
