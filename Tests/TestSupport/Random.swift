// Tests draw their random values from the library's own seeded generator.
@_exported import struct Interpreter.SplitMix64
