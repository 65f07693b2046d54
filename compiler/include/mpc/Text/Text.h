//===- Text.h - Textual form of models --------------------------*- C++ -*-===//
//
// A small, stable, readable text form of a Model, for golden tests (FileCheck)
// and debugging. The printer is deterministic and the parser reads everything
// the printer writes: print(parse(x)) == x for printer output.
//
//===----------------------------------------------------------------------===//
//
// Example:
//
//   opset ai.onnx 17
//   graph @mlp(%x: f32[8,16], %w: f32[16,4]) -> (%y: f32[8,4]) {
//     init %b: f32[4] = [0.5, 1, -2, 3]
//     %mm = MatMul(%x, %w) : f32[8,4] name="fc1"
//     %s = Add(%mm, %b) : f32[8,4]
//     %y = Softmax(%s) {axis = -1} : f32[8,4]
//     return %y
//   }
//
// Grammar (whitespace is insignificant; `//` starts a comment to end of line):
//
//   model     ::= header* graph training*
//   header    ::= 'ir' INT                         default: ir 8
//               | 'opset' domain INT               default: opset ai.onnx 17
//   graph     ::= 'graph' GNAME '(' [param {',' param}] ')'
//                 '->' '(' [outdecl {',' outdecl}] ')' '{' stmt* return '}'
//   param     ::= VALUE ':' type
//   outdecl   ::= VALUE [':' type] | type
//   stmt      ::= 'init' VALUE ':' type '=' data
//               | [result {',' result} '='] op '(' [operand {',' operand}] ')'
//                 [attrs] [':' type {',' type}] ['name' '=' STRING]
//   return    ::= 'return' [VALUE {',' VALUE}]
//   result    ::= VALUE | '_'                      `_`: an omitted optional output
//   operand   ::= VALUE | '_'                      `_`: an omitted optional input
//   op        ::= [domain '::'] (IDENT | STRING)   com.microsoft::FusedMatMul
//   domain    ::= IDENT | STRING                   `ai.onnx` is the default domain
//   attrs     ::= '{' [IDENT|STRING '=' attr {',' ...}] '}'     printed sorted by name
//   attr      ::= INT | FLOAT | STRING | DTYPE     a dtype name is an int (Cast {to = f16})
//               | '[' attr {',' attr} ']'          ints, floats (any FLOAT), strings,
//                                                  tensors or graphs
//               | ('ints'|'floats'|'strings'|'tensors'|'graphs') '[' ']'   empty lists
//               | 'dense' '<' type ':' data '>'    a tensor: dense<f32[2]: [1, 2]>
//               | graph                            a body, printed indented
//               | 'opaque' '<' INT [':' STRING {',' STRING}] '>'
//                                                  sparse tensors / type protos: the
//                                                  AttrKind number and hex protobufs
//   type      ::= '?'                              unknown
//               | DTYPE [shape]                    f32 (unknown shape), f32[] (scalar)
//               | 'seq' '<' type '>' | 'opt' '<' type '>'
//               | 'map' '<' DTYPE ',' type '>' | 'sparse' '<' DTYPE [shape] '>'
//   shape     ::= '[' ']' | '[' '*' ']' | '[' dim {',' dim} ']'
//   dim       ::= INT | '?' | IDENT | STRING       known, unknown, symbolic
//   data      ::= '[' [scalar {',' scalar}] ']'    row-major, every element
//               | 'splat' '(' scalar ')' | 'zeros' | 'iota'
//               | 'hex' STRING                     packed little-endian bytes
//               | 'external' '(' STRING [',' 'offset' '=' INT] [',' 'length' '=' INT] ')'
//   scalar    ::= INT | FLOAT | 'inf' | '-inf' | 'nan' | 'true' | 'false' | STRING
//   training  ::= 'training' '{' ['initialization' graph] ['algorithm' graph]
//                 {('initialization_binding' | 'update_binding') VALUE '=' VALUE} '}'
//
// Tokens: VALUE is `%name`, GNAME `@name`; names matching [A-Za-z0-9_.]+ are
// bare, others quoted (`%"a/b:0"`). Text names are the ONNX names, 1:1.
// IDENT is [A-Za-z_][A-Za-z0-9_.]*. STRING is "..." with `\\`, `\"`, `\n`,
// `\t` and `\HH` (hex byte) escapes; the printer escapes every byte outside
// printable ASCII as `\HH`. FLOAT has a `.` or an exponent: float attributes
// always print one (`1.0`); floats print with round-trip precision (%.9g,
// %.17g for f64). DTYPE is a short element type name (f32, f16, bf16, i64,
// bool, ...). Types of data whose elements have no decimal form (8- and 4-bit
// floats, 4-bit ints, complex) print as `hex`.
//
// Semantics:
// - Values are defined before they are used, except that a nested graph may
//   capture a value its enclosing graph defines later (the enclosing graph is
//   then sorted topologically). A name is defined once along a scope chain.
// - Result types are optional: results of a node with no type list get their
//   element type from the op's type rule (inferOutputType); `?` keeps a type
//   unknown. Types in the output list set the type of an untyped or inferred
//   value and must match an explicit one.
// - `init` of a graph input's name gives that input a default value.
// - Training graphs see the main graph's values; binding sides are names.
// - Not represented: doc strings, producer, metadata, functions, denotations,
//   external-data checksums, sparse initializers and quantization annotations.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_TEXT_TEXT_H
#define MPC_TEXT_TEXT_H

#include "mpc/IR/Graph.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"
#include <memory>
#include <string>

namespace mpc {

struct PrintOptions {
  /// Tensors with more elements than this print as `elided` (which does not
  /// parse) unless they are zeros, a splat or an iota; 0 prints every element.
  uint64_t maxTensorElements = 0;
};

/// Prints the model: header lines that differ from the defaults, the main
/// graph and the training entries.
void printModel(const Model &m, llvm::raw_ostream &os);
void printModel(const Model &m, llvm::raw_ostream &os, const PrintOptions &opts);
/// Prints one graph (a main, nested or training graph) at indentation 0.
void printGraph(const Graph &g, llvm::raw_ostream &os);
void printGraph(const Graph &g, llvm::raw_ostream &os, const PrintOptions &opts);
/// Prints a type as the text form writes it ("f32[8,?,batch]", "seq<f16>", "?").
void printType(const Type &t, llvm::raw_ostream &os);
/// The printed model as a string.
std::string modelToText(const Model &m);

/// Parses a model. Errors are one line, "<bufferName>:<line>:<col>: error:
/// <message>". Relative external data locations resolve against the folder
/// of `bufferName` and must stay inside it.
llvm::Expected<std::unique_ptr<Model>> parseModelText(llvm::StringRef text,
                                                      llvm::StringRef bufferName);

} // namespace mpc

#endif // MPC_TEXT_TEXT_H
