import Foundation
import GraphIR
import Interpreter

/// A small command-line parser (no ArgumentParser package available):
/// flags `--x`, options `--x value` / `--x=value`, positionals, `--` ends options,
/// `-h` / `--help` anywhere asks for help. Each verb declares its options once (name, value
/// type, help); values are checked against their type while parsing, so a verb reads them
/// already typed (`args.int("max-tokens")`). Errors are `UsageError`s (exit 64), with a
/// did-you-mean for unknown options.

/// What an option's value must be; checked while parsing.
enum ValueKind: Equatable {
    /// No value: a flag.
    case flag
    case text
    /// A whole number, optionally within bounds.
    case int(ClosedRange<Int>?)
    case float
    /// One of the listed words.
    case choice([String])
    /// Comma-separated whole numbers (`1,16,64`), each within bounds.
    case intList(ClosedRange<Int>?)
}

/// A flag (no value) or an option (takes one value).
struct OptionSpec {
    var name: String
    /// `nil` for a flag; the placeholder shown in help for an option (e.g. `name`).
    var valueName: String?
    var help: String
    /// A flag that does the verb's whole job alone (e.g. `--list-passes`): positionals are then
    /// not required.
    var standalone = false
    var kind: ValueKind = .text

    static func flag(_ name: String, _ help: String, standalone: Bool = false) -> OptionSpec {
        OptionSpec(name: name, valueName: nil, help: help, standalone: standalone, kind: .flag)
    }
    static func option(_ name: String, value: String, _ help: String) -> OptionSpec {
        OptionSpec(name: name, valueName: value, help: help)
    }
    static func int(_ name: String, value: String = "n", _ help: String, range: ClosedRange<Int>? = nil) -> OptionSpec {
        OptionSpec(name: name, valueName: value, help: help, kind: .int(range))
    }
    static func float(_ name: String, value: String, _ help: String) -> OptionSpec {
        OptionSpec(name: name, valueName: value, help: help, kind: .float)
    }
    static func choice(_ name: String, _ choices: [String], _ help: String) -> OptionSpec {
        OptionSpec(name: name, valueName: choices.joined(separator: "|"), help: help, kind: .choice(choices))
    }
    static func intList(_ name: String, value: String = "1,2,3", _ help: String, range: ClosedRange<Int>? = nil) -> OptionSpec {
        OptionSpec(name: name, valueName: value, help: help, kind: .intList(range))
    }
}

struct PositionalSpec {
    var name: String
    var help: String
    var optional = false
}

/// What a verb reads. It fixes the verb's positional arguments and whether the verb takes the
/// options of ``OptionGroup/loading``: every verb that reads a model does, after all its others.
enum VerbInput {
    /// One model, any loader form: `<model>` (``CommonOptions/model``).
    case model
    /// A stateful LLM package: `<model>` (``CommonOptions/llmModel``).
    case llm
    /// Models named by positionals of the verb's own (`compare A [B]`).
    case models([PositionalSpec])
    /// No model; positionals of the verb's own (`completion bash|zsh`).
    case arguments([PositionalSpec])

    var positionals: [PositionalSpec] {
        switch self {
        case .model: return [CommonOptions.model]
        case .llm: return [CommonOptions.llmModel]
        case let .models(p), let .arguments(p): return p
        }
    }

    var readsModel: Bool {
        if case .arguments = self { return false }
        return true
    }
}

/// What a verb accepts, and its help text.
struct CommandSpec {
    var name: String
    /// One line, shown in `forge-ir --help`.
    var summary: String
    var positionals: [PositionalSpec]
    /// Every option the verb accepts, in help order: its own, then those of its groups.
    var options: [OptionSpec]
    /// Extra paragraphs shown after the options in `--help`.
    var discussion: String

    /// A verb named `name` reading `input`, with its own `options` followed by every option of
    /// `groups`, in order (the groups are the options several verbs share, declared once in
    /// ``OptionGroup``), then those of ``OptionGroup/loading`` when `input` is a model.
    ///
    /// `about` is the verb's text as a docstring is written: its first line is the summary
    /// (`forge-ir --help`, and OVERVIEW of the verb's help); after one empty line, the
    /// discussion (the paragraphs after OPTIONS).
    init(name: String, reads input: VerbInput, about: String, options: [OptionSpec] = [], groups: [OptionGroup] = []) {
        self.name = name
        let text = about.split(separator: "\n", maxSplits: 2, omittingEmptySubsequences: false)
        precondition(text.count == 1 || (text.count == 3 && text[1].isEmpty),
                     "\(name): `about` is a summary line, then an empty line and the discussion")
        summary = String(text[0])
        discussion = text.count == 3 ? String(text[2]) : ""
        positionals = input.positionals
        self.options = options + (groups + (input.readsModel ? [.loading] : [])).flatMap(\.options)
    }
}

/// A usage error: exit code 64, message plus a hint to `--help`.
struct UsageError: Error, CustomStringConvertible {
    var message: String
    /// The command whose help to point at (`forge-ir dump`); nil: the verb being run.
    var helpCommand: String?
    var description: String { message }

    init(_ message: String) { self.message = message }
    init(message: String, helpCommand: String? = nil) {
        self.message = message
        self.helpCommand = helpCommand
    }
}

struct ParsedArguments {
    var helpRequested = false
    var flags: Set<String> = []
    var values: [String: String] = [:]
    /// Every value of each option, in order (for repeatable options such as `--input`).
    var allValues: [String: [String]] = [:]
    var positionals: [String] = []

    func flag(_ name: String) -> Bool { flags.contains(name) }
    /// The last value given for option `name`.
    func value(_ name: String) -> String? { values[name] }
    /// Every value given for option `name`, in order.
    func values(of name: String) -> [String] { allValues[name] ?? [] }

    // Typed reads of options declared with that type (the parser has checked the text).
    func int(_ name: String) -> Int? { values[name].flatMap { Int($0) } }
    func int(_ name: String, default d: Int) -> Int { int(name) ?? d }
    func float(_ name: String) -> Float? { values[name].flatMap { Float($0) } }
    func float(_ name: String, default d: Float) -> Float { float(name) ?? d }
    func ints(_ name: String) -> [Int]? { values[name].map { ArgumentParser.splitInts($0) ?? [] } }

    /// `--precision` (declared as ``CommonOptions/precision``), fp32 by default.
    var precision: Precision { values["precision"].flatMap(Precision.init(rawValue:)) ?? .fp32 }

    /// `--activations` (``CommonOptions/activations``), or `--int8-activations` (the older
    /// spelling of `--activations int8`); fp32 (exact) by default.
    /// - Throws: `UsageError` when both are given and disagree.
    func activations() throws -> ActivationQuantization {
        let chosen = values["activations"].flatMap(ActivationQuantization.init(rawValue:))
        guard flag("int8-activations") else { return chosen ?? .exact }
        guard chosen == nil || chosen == .int8 else {
            throw UsageError(message: "--int8-activations means --activations int8; give one of them")
        }
        return .int8
    }
}

enum ArgumentParser {
    static let toolName = "forge-ir"

    /// Parses the arguments after the verb.
    static func parse(_ args: [String], spec: CommandSpec) throws -> ParsedArguments {
        let helpCommand = "\(toolName) \(spec.name)"
        var result = ParsedArguments()
        // Help wins over every other error.
        if let end = Optional(args.firstIndex(of: "--") ?? args.endIndex),
           args[..<end].contains(where: { $0 == "--help" || $0 == "-h" }) {
            result.helpRequested = true
            return result
        }
        var i = 0
        var onlyPositionals = false
        while i < args.count {
            let a = args[i]
            i += 1
            if onlyPositionals || a == "-" || !a.hasPrefix("-") {
                result.positionals.append(a)
                continue
            }
            if a == "--" { onlyPositionals = true; continue }
            // Single-letter options take one dash (`-o out`); everything else two.
            let short = !a.hasPrefix("--") && a.count == 2
            guard a.hasPrefix("--") || (short && spec.options.contains { $0.name == String(a.dropFirst()) }) else {
                throw UsageError(message: "unknown option '\(a)'" + NameSuggestion.hint(String(a.drop { $0 == "-" }), in: spec.options.map(\.name), prefix: "--"),
                                 helpCommand: helpCommand)
            }
            var name = String(a.dropFirst(short ? 1 : 2))
            var inlineValue: String?
            if let eq = name.firstIndex(of: "=") {
                inlineValue = String(name[name.index(after: eq)...])
                name = String(name[..<eq])
            }
            guard let opt = spec.options.first(where: { $0.name == name }) else {
                throw UsageError(message: "unknown option '\(short ? "-" : "--")\(name)'" + NameSuggestion.hint(name, in: spec.options.map(\.name), prefix: "--"),
                                 helpCommand: helpCommand)
            }
            if opt.valueName == nil {
                if inlineValue != nil {
                    throw UsageError(message: "option '--\(name)' does not take a value", helpCommand: helpCommand)
                }
                result.flags.insert(name)
            } else {
                let v: String
                if let inline = inlineValue {
                    v = inline
                } else {
                    guard i < args.count else {
                        throw UsageError(message: "option '\(dashes(name))\(name)' needs a value <\(opt.valueName!)>", helpCommand: helpCommand)
                    }
                    v = args[i]
                    i += 1
                }
                if let problem = check(v, opt) {
                    throw UsageError(message: "\(dashes(name))\(name) \(problem)", helpCommand: helpCommand)
                }
                result.values[name] = v
                result.allValues[name, default: []].append(v)
            }
        }
        let standalone = spec.options.contains { $0.standalone && result.flags.contains($0.name) }
        let required = standalone ? 0 : spec.positionals.filter { !$0.optional }.count
        if result.positionals.count < required {
            let missing = spec.positionals[result.positionals.count]
            throw UsageError(message: "missing argument <\(missing.name)>", helpCommand: helpCommand)
        }
        if result.positionals.count > spec.positionals.count {
            throw UsageError(message: "unexpected argument '\(result.positionals[spec.positionals.count])'", helpCommand: helpCommand)
        }
        return result
    }

    /// Why `value` does not fit the option's declared kind, or nil.
    static func check(_ value: String, _ opt: OptionSpec) -> String? {
        func bounds(_ r: ClosedRange<Int>?) -> String {
            guard let r else { return "" }
            return r.upperBound == Int.max ? " ≥ \(r.lowerBound)" : " in \(r.lowerBound)...\(r.upperBound)"
        }
        switch opt.kind {
        case .flag, .text:
            return nil
        case let .int(range):
            guard let n = Int(value), range?.contains(n) ?? true else { return "takes a whole number\(bounds(range)), got '\(value)'" }
            return nil
        case .float:
            guard let f = Double(value), f.isFinite else { return "takes a number, got '\(value)'" }
            return nil
        case let .choice(words):
            guard words.contains(value) else {
                return "must be one of \(words.joined(separator: ", ")), not '\(value)'" + NameSuggestion.hint(value, in: words)
            }
            return nil
        case let .intList(range):
            if let k = emptyEntry(value) { return "has an empty entry at position \(k) of '\(value)'" }
            guard let list = splitInts(value), !list.isEmpty, list.allSatisfy({ range?.contains($0) ?? true }) else {
                return "takes comma-separated whole numbers\(bounds(range)), got '\(value)'"
            }
            return nil
        }
    }

    /// The 1-based position of the first empty entry of a comma-separated list (`1,,2` → 2,
    /// `1,2,` → 3), or nil when there is none or `s` holds no comma (an empty `s` is left to
    /// the caller's own check).
    static func emptyEntry(_ s: String) -> Int? {
        guard s.contains(",") else { return nil }
        let parts = s.split(separator: ",", omittingEmptySubsequences: false)
        return parts.firstIndex { $0.trimmingCharacters(in: .whitespaces).isEmpty }.map { $0 + 1 }
    }

    /// `1,16,64` → [1, 16, 64]; nil when an item is not a whole number.
    static func splitInts(_ s: String) -> [Int]? {
        let parts = s.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        var out: [Int] = []
        for p in parts { guard let v = Int(p) else { return nil }; out.append(v) }
        return out
    }

    /// `-` for single-letter options, `--` otherwise.
    static func dashes(_ name: String) -> String { name.count == 1 ? "-" : "--" }

    static func usageLine(_ spec: CommandSpec) -> String {
        var parts = ["\(toolName) \(spec.name)"]
        for p in spec.positionals { parts.append(p.optional ? "[<\(p.name)>]" : "<\(p.name)>") }
        for o in spec.options { parts.append(o.valueName.map { "[\(dashes(o.name))\(o.name) <\($0)>]" } ?? "[\(dashes(o.name))\(o.name)]") }
        return parts.joined(separator: " ")
    }

    /// `--help` text of a verb.
    static func help(_ spec: CommandSpec) -> String {
        var out = "OVERVIEW: \(spec.summary)\n\nUSAGE: \(usageLine(spec))\n"
        if !spec.positionals.isEmpty {
            out += "\nARGUMENTS:\n"
            for p in spec.positionals { out += row("<\(p.name)>", p.help) }
        }
        out += "\nOPTIONS:\n"
        for o in spec.options {
            out += row(dashes(o.name) + o.name + (o.valueName.map { " <\($0)>" } ?? ""), o.help)
        }
        out += row("-h, --help", "Show help for this verb.")
        if !spec.discussion.isEmpty { out += "\n" + spec.discussion + (spec.discussion.hasSuffix("\n") ? "" : "\n") }
        return out
    }

    /// A two-column help row (left column 24 wide).
    static func row(_ left: String, _ right: String) -> String {
        let l = "  " + left
        if l.count >= 24 { return l + "\n" + String(repeating: " ", count: 24) + right + "\n" }
        return l + String(repeating: " ", count: 24 - l.count) + right + "\n"
    }
}
