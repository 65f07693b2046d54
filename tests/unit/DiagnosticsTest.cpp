//===- DiagnosticsTest.cpp - Names cannot forge a message -------------===//
#include "mpc/Support/Diagnostics.h"
#include "gtest/gtest.h"

using namespace mpc;

TEST(QuoteName, KeepsPlainAndUtf8Names) {
  EXPECT_EQ(quoteName("conv1/weight:0"), "'conv1/weight:0'");
  EXPECT_EQ(quoteName(""), "''");
  EXPECT_EQ(quoteName("\xc3\xa9t\xc3\xa9"), "'\xc3\xa9t\xc3\xa9'"); // "été"
}

TEST(QuoteName, EscapesWhatCouldForgeAMessage) {
  EXPECT_EQ(quoteName("a\nb"), "'a\\nb'");
  EXPECT_EQ(quoteName("a\r\tb"), "'a\\r\\tb'");
  EXPECT_EQ(quoteName("it's \"x\""), "'it\\'s \\\"x\\\"'");
  EXPECT_EQ(quoteName("back\\slash"), "'back\\\\slash'");
  EXPECT_EQ(quoteName(llvm::StringRef("a\0b", 3)), "'a\\x00b'");
  EXPECT_EQ(quoteName("\x1b[31m\x7f"), "'\\x1b[31m\\x7f'");
  // Invalid UTF-8, C1 controls (U+0085 next line), U+2028 line separator and
  // a bidirectional override are written byte by byte.
  EXPECT_EQ(quoteName("\xff\xc3"), "'\\xff\\xc3'");
  EXPECT_EQ(quoteName("\xc2\x85"), "'\\xc2\\x85'");
  EXPECT_EQ(quoteName("\xe2\x80\xa8"), "'\\xe2\\x80\\xa8'");
  EXPECT_EQ(quoteName("\xe2\x80\xae"), "'\\xe2\\x80\\xae'");
  EXPECT_EQ(quoteName("\xed\xa0\x80"), "'\\xed\\xa0\\x80'"); // a surrogate
}

TEST(InputError, EscapesQuotedArgumentsOnly) {
  llvm::Error e = inputError("value '{0}' of node '{1}' has {2} uses ({3})", "a\nb",
                             std::string("n'1"), 3, "x\ny");
  EXPECT_EQ(llvm::toString(std::move(e)), "value 'a\\nb' of node 'n\\'1' has 3 uses (x\ny)");
  // Format styles still apply; an argument quoted once is escaped wherever it appears.
  EXPECT_EQ(formatQuoted("{0:x} '{1}' {1} {2}", 255u, "\t", "\t"), "0xff '\\t' \\t \t");
}

// What the CLI prints every error and warning through: a library's message
// quoting a model's name (the ONNX checker's "Unrecognized attribute: cr\rx")
// stays one line; quotes and backslashes are the message's own and stay.
TEST(OneLine, EscapesLineBreaksOnly) {
  EXPECT_EQ(oneLine("plain 'quoted' \"text\" back\\slash"),
            "plain 'quoted' \"text\" back\\slash");
  EXPECT_EQ(oneLine("Unrecognized attribute: cr\rx for operator Flatten"),
            "Unrecognized attribute: cr\\rx for operator Flatten");
  EXPECT_EQ(oneLine("a\nmpc: error: forged\tb"), "a\\nmpc: error: forged\\tb");
  EXPECT_EQ(oneLine("sep\xe2\x80\xa8x \xc2\x85 \xff"), "sep\\xe2\\x80\\xa8x \\xc2\\x85 \\xff");
  EXPECT_EQ(oneLine("caf\xc3\xa9"), "caf\xc3\xa9");
  // Already escaped text is left as it is (no second escaping).
  EXPECT_EQ(oneLine(quoteName("a\nb")), "'a\\nb'");
}
