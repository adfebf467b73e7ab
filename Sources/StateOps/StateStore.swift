import GraphIR
import Interpreter
