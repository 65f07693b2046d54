//===- BinaryOps.h - Element-wise binary op bodies --------------*- C++ -*-===//
//
// One functor per ONNX binary op, MPC_HD, computing in the compute type T.
// Integer T is supported natively with GPU semantics: wrap-around instead of
// signed-overflow UB, and x / 0 == x % 0 == 0 instead of a trap (numpy also
// gives 0 for integer division by zero). The bitwise ops take integer T only.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_KERNELS_BINARYOPS_H
#define MPC_RUNTIME_KERNELS_BINARYOPS_H

#include "mpc/Runtime/Kernels/HostDevice.h"
#include "mpc/Runtime/Kernels/MathFunctions.h"
#include "mpc/Runtime/Kernels/UnaryOps.h"

#include <type_traits>

namespace mpc {
namespace kernels {

namespace detail {
/// Unsigned type for wrapping integer math (identity for floats). Types
/// narrower than unsigned use unsigned itself, so that integer promotion never
/// turns a uint16_t product into an overflowing int.
template <typename T, bool = std::is_integral<T>::value> struct WrapType {
  using type = T;
};
template <typename T> struct WrapType<T, true> {
  using type = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned,
                                  std::make_unsigned_t<T>>;
};
template <typename T> using Wrap = typename WrapType<T>::type;

/// True when a / b or a % b would trap: b == 0, or INT_MIN / -1.
template <typename T> MPC_HD constexpr bool isBadDivision(T a, T b) {
  if (b == T(0))
    return true;
  if constexpr (std::is_signed<T>::value)
    return b == T(-1) && a == T(Wrap<T>(1) << (sizeof(T) * 8 - 1));
  return false;
}
} // namespace detail

//===----------------------------------------------------------------------===//
// Arithmetic
//===----------------------------------------------------------------------===//

/// a + b.
struct Add {
  template <typename T> MPC_HD T operator()(T a, T b) const {
    using W = detail::Wrap<T>;
    return T(W(a) + W(b));
  }
};

/// a - b.
struct Sub {
  template <typename T> MPC_HD T operator()(T a, T b) const {
    using W = detail::Wrap<T>;
    return T(W(a) - W(b));
  }
};

/// a * b.
struct Mul {
  template <typename T> MPC_HD T operator()(T a, T b) const {
    using W = detail::Wrap<T>;
    return T(W(a) * W(b));
  }
};

/// a / b; integers truncate toward zero, x / 0 == 0, INT_MIN / -1 == INT_MIN.
struct Div {
  template <typename T> MPC_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral<T>::value) {
      if (detail::isBadDivision(a, b))
        return b == T(0) ? T(0) : a;
    }
    return a / b;
  }
};

/// a^b. Integer T uses exact repeated squaring with wrap-around; a negative
/// integer exponent gives 0 unless |a| == 1.
struct Pow {
  template <typename T> MPC_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral<T>::value) {
      using W = detail::Wrap<T>;
      if (detail::isNegative(b)) {
        if (a == T(1))
          return T(1);
        if (detail::isNegative(a) && a == detail::negate(T(1)))
          return (W(b) & 1) ? a : T(1);
        return T(0);
      }
      W result = 1, base = W(a), e = W(b);
      while (e) {
        if (e & 1)
          result = W(result * base);
        base = W(base * base);
        e >>= 1;
      }
      return T(result);
    } else {
      return math::pow(a, b);
    }
  }
};

/// Remainder. fmod = false (ONNX default, integers only in ONNX) takes the
/// sign of the divisor like Python's %; fmod = true takes the sign of the
/// dividend like C's fmod. x mod 0 is NaN for floats and 0 for integers.
struct Mod {
  bool fmod = false;
  template <typename T> MPC_HD T operator()(T a, T b) const {
    T r;
    if constexpr (std::is_integral<T>::value) {
      if (detail::isBadDivision(a, b))
        return T(0);
      r = a % b;
    } else {
      r = math::fmod(a, b);
    }
    if (!fmod && r != T(0) && detail::isNegative(r) != detail::isNegative(b))
      r = T(detail::Wrap<T>(r) + detail::Wrap<T>(b));
    return r;
  }
};

/// The larger operand; a NaN operand wins (numpy maximum, ONNX Max).
struct Max {
  template <typename T> MPC_HD T operator()(T a, T b) const {
    return (a > b || a != a) ? a : b;
  }
};

/// The smaller operand; a NaN operand wins (numpy minimum, ONNX Min).
struct Min {
  template <typename T> MPC_HD T operator()(T a, T b) const {
    return (a < b || a != a) ? a : b;
  }
};

/// x for x >= 0, slope * x otherwise (slope broadcast as the second input).
struct PRelu {
  template <typename T> MPC_HD T operator()(T x, T slope) const {
    return x < T(0) ? slope * x : x;
  }
};

//===----------------------------------------------------------------------===//
// Bitwise (integer T only)
//===----------------------------------------------------------------------===//

/// a & b.
struct BitwiseAnd {
  template <typename T> MPC_HD T operator()(T a, T b) const {
    static_assert(std::is_integral<T>::value, "BitwiseAnd takes integers");
    return T(a & b);
  }
};

/// a | b.
struct BitwiseOr {
  template <typename T> MPC_HD T operator()(T a, T b) const {
    static_assert(std::is_integral<T>::value, "BitwiseOr takes integers");
    return T(a | b);
  }
};

/// a ^ b.
struct BitwiseXor {
  template <typename T> MPC_HD T operator()(T a, T b) const {
    static_assert(std::is_integral<T>::value, "BitwiseXor takes integers");
    return T(a ^ b);
  }
};

/// a << b (left = true) or a >> b, on the bits of a as unsigned (ONNX
/// BitShift admits unsigned types only; signed T shifts logically). Shift
/// amounts of the type's width or more give 0, as numpy does, instead of UB.
struct BitShift {
  bool left = false;
  template <typename T> MPC_HD T operator()(T a, T b) const {
    static_assert(std::is_integral<T>::value, "BitShift takes integers");
    using U = std::make_unsigned_t<T>;
    using W = detail::Wrap<U>;
    U n = U(b);
    if (n >= U(sizeof(T) * 8))
      return T(0);
    return left ? T(W(U(a)) << n) : T(W(U(a)) >> n);
  }
};

//===----------------------------------------------------------------------===//
// Logical (And, Or, Xor: bool operands and result; the CPU's runLogical and
// the CUDA launcher both call these)
//===----------------------------------------------------------------------===//

/// a && b.
struct And {
  template <typename T> MPC_HD bool operator()(T a, T b) const { return bool(a) && bool(b); }
};

/// a || b.
struct Or {
  template <typename T> MPC_HD bool operator()(T a, T b) const { return bool(a) || bool(b); }
};

/// a != b as truth values.
struct Xor {
  template <typename T> MPC_HD bool operator()(T a, T b) const { return bool(a) != bool(b); }
};

//===----------------------------------------------------------------------===//
// Comparisons (bool results; any comparison with NaN is false but !=)
//===----------------------------------------------------------------------===//

/// a == b.
struct Equal {
  template <typename T> MPC_HD bool operator()(T a, T b) const {
    return a == b;
  }
};

/// a < b.
struct Less {
  template <typename T> MPC_HD bool operator()(T a, T b) const { return a < b; }
};

/// a <= b.
struct LessOrEqual {
  template <typename T> MPC_HD bool operator()(T a, T b) const {
    return a <= b;
  }
};

/// a > b.
struct Greater {
  template <typename T> MPC_HD bool operator()(T a, T b) const { return a > b; }
};

/// a >= b.
struct GreaterOrEqual {
  template <typename T> MPC_HD bool operator()(T a, T b) const {
    return a >= b;
  }
};

} // namespace kernels
} // namespace mpc

#endif // MPC_RUNTIME_KERNELS_BINARYOPS_H
