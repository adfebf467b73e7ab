#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import GraphIR
import Interpreter

/// The verbs, in the order `forge-ir --help` lists them. `run`, `optimize`, `diagnose`,
/// `generate` and `bench` slot in here as one file each.
let commands: [Command.Type] = [
    DumpCommand.self,
    RunCommand.self,
    OptimizeCommand.self,
    DiagnoseCommand.self,
    GenerateCommand.self,
    BenchCommand.self,
    CompareCommand.self,
    ExtractCommand.self,
    ReduceCommand.self,
    CompletionCommand.self,
]

let version = "0.1.0"

// Steadier, lower peak memory (see Memory.tuneMalloc).
Memory.tuneMalloc()

func topLevelHelp() -> String {
    var out = """
    OVERVIEW: forge-ir — inspect Core ML ML Program models (.mlpackage, .mlmodelc, .mlmodel) on Linux.

    USAGE: forge-ir <verb> [<arguments>] [<options>]
           forge-ir <verb> --help

    VERBS:

    """
    for c in commands { out += ArgumentParser.row(c.spec.name, c.spec.summary) }
    out += """

    OPTIONS:
      -h, --help            Show this help.
      --version             Show the version.

    EXIT CODES: 0 success, 1 failure, 64 usage error.

    """
    return out
}

/// One line, whatever the error says.
func oneLine(_ error: Error) -> String {
    ErrorText.describe(error)
}

func usageFailure(_ e: UsageError, verb: String) -> Int32 {
    Console.err("\(ArgumentParser.toolName): error: \(oneLine(e))\n")
    Console.err("Run '\(e.helpCommand ?? "\(ArgumentParser.toolName) \(verb)") --help' for usage.\n")
    return ExitCode.usage
}

func main(_ argv: [String]) -> Int32 {
    signal(SIGPIPE, SIG_IGN)
    guard let verb = argv.first else {
        Console.err("USAGE: forge-ir <verb> [<arguments>] [<options>]\n")
        Console.err("\(ArgumentParser.toolName): error: no verb given\n")
        Console.err("Run 'forge-ir --help' for the list of verbs.\n")
        return ExitCode.usage
    }
    switch verb {
    case "--help", "-h", "help":
        if verb == "help", argv.count > 1, let c = commands.first(where: { $0.spec.name == argv[1] }) {
            Console.out(ArgumentParser.help(c.spec))
        } else {
            Console.out(topLevelHelp())
        }
        return ExitCode.ok
    case "--version":
        Console.out("forge-ir \(version)\n")
        return ExitCode.ok
    default:
        break
    }
    guard let command = commands.first(where: { $0.spec.name == verb }) else {
        let what = verb.hasPrefix("-") ? "unknown option '\(verb)'"
            : "unknown verb '\(verb)'" + NameSuggestion.hint(verb, in: commands.map { $0.spec.name })
        Console.err("\(ArgumentParser.toolName): error: \(what)\n")
        Console.err("Run 'forge-ir --help' for the list of verbs.\n")
        return ExitCode.usage
    }
    do {
        let args = try ArgumentParser.parse(Array(argv.dropFirst()), spec: command.spec)
        if args.helpRequested {
            Console.out(ArgumentParser.help(command.spec))
            return ExitCode.ok
        }
        try CommonOptions.apply(args)
        return try command.run(args)
    } catch let e as UsageError {
        return usageFailure(e, verb: verb)
    } catch let e as MILTextError {
        // One error line, then the source excerpt with a caret under the column.
        Console.err("\(ArgumentParser.toolName): error: \(e.headline)\n\(e.caretLines)\n")
        return ExitCode.failure
    } catch {
        Console.err("\(ArgumentParser.toolName): error: \(oneLine(error))\n")
        return ExitCode.failure
    }
}

exit(main(Array(CommandLine.arguments.dropFirst())))
