//===- GemmPlan.cpp - Row-major matrix products as cuBLASLt calls ----------===//
//
// See GemmPlan.h. Pure shape arithmetic: built and tested on every machine,
// with or without the CUDA toolkit.
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/Cuda/GemmPlan.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/FormatVariadic.h"

#include <limits>
#include <string>

using namespace mpc;
using namespace mpc::cuda;

namespace {

std::string shapeText(llvm::ArrayRef<int64_t> s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i)
    out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

llvm::Error planError(const MatmulProblem &p, const llvm::Twine &why) {
  return llvm::createStringError(
      std::errc::invalid_argument, "matrix product of %s%s and %s%s: %s",
      shapeText(p.aShape).c_str(), p.transA ? " (transposed)" : "",
      shapeText(p.bShape).c_str(), p.transB ? " (transposed)" : "", why.str().c_str());
}

/// One stored operand: its batch axes, and its matrix as stored (rows x cols).
struct Stored {
  llvm::SmallVector<int64_t, 4> batch;
  int64_t rows = 0, cols = 0;
};

Stored splitOperand(llvm::ArrayRef<int64_t> shape, bool rowVector) {
  Stored s;
  if (shape.size() == 1) { // a vector: [1, K] for A, [K, 1] for B
    s.rows = rowVector ? 1 : shape[0];
    s.cols = rowVector ? shape[0] : 1;
    return s;
  }
  s.batch.assign(shape.begin(), shape.end() - 2);
  s.rows = shape[shape.size() - 2];
  s.cols = shape.back();
  return s;
}

/// Strides (elements) of `s`'s matrices along each axis of the broadcast
/// batch `batch` (right-aligned); 0 where the operand has size 1 or no axis.
llvm::SmallVector<int64_t, 4> batchStrides(const Stored &s, llvm::ArrayRef<int64_t> batch) {
  llvm::SmallVector<int64_t, 4> strides(batch.size(), 0);
  int64_t stride = s.rows * s.cols;
  size_t lead = batch.size() - s.batch.size();
  for (size_t i = s.batch.size(); i-- > 0;) {
    if (s.batch[i] != 1)
      strides[lead + i] = stride;
    stride *= s.batch[i];
  }
  return strides;
}

/// The alignment preference of an operand addressed at these element offsets.
unsigned alignmentOf(llvm::ArrayRef<int64_t> elementOffsets, unsigned elementBytes) {
  uint64_t bits = 256;
  for (int64_t o : elementOffsets)
    bits |= static_cast<uint64_t>(o) * elementBytes;
  return static_cast<unsigned>(bits & (~bits + 1)); // lowest set bit
}

} // namespace

llvm::Expected<MatmulPlan> mpc::cuda::planMatmul(const MatmulProblem &p) {
  if (p.aShape.empty() || p.bShape.empty())
    return planError(p, "an operand is a scalar (rank 0)");
  for (int64_t d : p.aShape)
    if (d < 0)
      return planError(p, "a dimension is negative");
  for (int64_t d : p.bShape)
    if (d < 0)
      return planError(p, "a dimension is negative");
  bool aVector = p.aShape.size() == 1, bVector = p.bShape.size() == 1;
  if ((aVector && p.transA) || (bVector && p.transB))
    return planError(p, "a 1-D operand cannot be transposed");

  Stored a = splitOperand(p.aShape, /*rowVector=*/true);
  Stored b = splitOperand(p.bShape, /*rowVector=*/false);
  int64_t m = p.transA ? a.cols : a.rows, ka = p.transA ? a.rows : a.cols;
  int64_t kb = p.transB ? b.cols : b.rows, n = p.transB ? b.rows : b.cols;
  if (ka != kb)
    return planError(p, llvm::formatv("inner sizes differ ({0} and {1})", ka, kb));
  int64_t k = ka;

  // The broadcast batch, right-aligned.
  size_t rank = std::max(a.batch.size(), b.batch.size());
  llvm::SmallVector<int64_t, 4> batch(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i + a.batch.size() >= rank ? a.batch[i + a.batch.size() - rank] : 1;
    int64_t db = i + b.batch.size() >= rank ? b.batch[i + b.batch.size() - rank] : 1;
    if (da != db && da != 1 && db != 1)
      return planError(p, llvm::formatv("batch axes do not broadcast ({0} and {1})", da, db));
    batch[i] = da == 1 ? db : da;
  }

  MatmulPlan plan;
  plan.outShape.assign(batch.begin(), batch.end());
  if (!aVector)
    plan.outShape.push_back(m);
  if (!bVector)
    plan.outShape.push_back(n);

  llvm::SmallVector<int64_t, 4> sa = batchStrides(a, batch), sb = batchStrides(b, batch);
  llvm::SmallVector<int64_t, 4> sd(rank, 0);
  for (size_t i = rank, stride = m * n; i-- > 0;) {
    sd[i] = stride;
    stride *= batch[i];
  }
  // Axes of size 1 address nothing; an empty axis (or M, N = 0) means no call.
  int64_t total = 1;
  llvm::SmallVector<size_t, 4> axes;
  for (size_t i = 0; i < rank; ++i) {
    total *= batch[i];
    if (batch[i] != 1)
      axes.push_back(i);
  }

  LtGemm &g = plan.gemm;
  g.m = n;
  g.n = m;
  g.k = k;
  // cuBLASLt's A is the user's B: stored [K, N] is column-major N x K.
  g.a.rows = p.transB ? k : n;
  g.a.cols = p.transB ? n : k;
  g.a.ld = b.cols;
  g.a.trans = p.transB;
  // cuBLASLt's B is the user's A: stored [M, K] is column-major K x M.
  g.b.rows = p.transA ? m : k;
  g.b.cols = p.transA ? k : m;
  g.b.ld = a.cols;
  g.b.trans = p.transA;
  g.d.rows = n;
  g.d.cols = m;
  g.d.ld = n;
  if (total == 0 || m == 0 || n == 0)
    return plan; // nothing to compute (K = 0 with a non-empty result is the caller's zero fill)

  bool bShared = true, aDense = true;
  for (size_t i : axes) {
    bShared &= sb[i] == 0;
    aDense &= sa[i] == sd[i] / (m * n) * (m * k);
  }
  if (bShared && aDense && !p.transA) {
    // Fold A's batch into the rows of one GEMM: [batch..., M, K] is [batch*M, K].
    g.n = total * m;
    g.b.cols = total * m;
    g.d.cols = total * m;
    g.offsets.push_back({});
  } else {
    // The longest run of trailing axes every operand walks with one stride.
    size_t inner = axes.size();
    auto chains = [&](llvm::ArrayRef<int64_t> s, size_t outerAxis, size_t innerAxis) {
      return s[outerAxis] == s[innerAxis] * batch[innerAxis];
    };
    if (inner > 0) {
      --inner;
      while (inner > 0 && chains(sa, axes[inner - 1], axes[inner]) &&
             chains(sb, axes[inner - 1], axes[inner]) && chains(sd, axes[inner - 1], axes[inner]))
        --inner;
    }
    int64_t count = 1;
    for (size_t j = inner; j < axes.size(); ++j)
      count *= batch[axes[j]];
    if (count > std::numeric_limits<int32_t>::max())
      return planError(p, llvm::formatv("{0} matrices exceed cuBLASLt's batch count", count));
    g.batchCount = count;
    if (inner < axes.size()) {
      size_t last = axes.back();
      g.a.batchStride = sb[last];
      g.b.batchStride = sa[last];
      g.d.batchStride = sd[last];
    }
    // One call per index of the outer axes, in row-major order.
    llvm::SmallVector<int64_t, 4> idx(inner, 0);
    for (;;) {
      LtGemm::Offsets o;
      for (size_t j = 0; j < inner; ++j) {
        o.userA += idx[j] * sa[axes[j]];
        o.userB += idx[j] * sb[axes[j]];
        o.d += idx[j] * sd[axes[j]];
      }
      g.offsets.push_back(o);
      size_t j = inner;
      while (j > 0 && ++idx[j - 1] == batch[axes[j - 1]])
        idx[--j] = 0;
      if (j == 0)
        break;
    }
  }

  llvm::SmallVector<int64_t, 8> offA, offB, offD;
  for (const LtGemm::Offsets &o : g.offsets) {
    offA.push_back(o.userB);
    offB.push_back(o.userA);
    offD.push_back(o.d);
  }
  offA.push_back(g.a.batchStride);
  offB.push_back(g.b.batchStride);
  offD.push_back(g.d.batchStride);
  g.a.alignment = alignmentOf(offA, p.elementBytes);
  g.b.alignment = alignmentOf(offB, p.elementBytes);
  g.d.alignment = alignmentOf(offD, p.elementBytes);
  return plan;
}

/// Stored X [R, b..., C] as transBatch reads it: [b..., R, C].
static std::vector<int64_t> transBatchView(llvm::ArrayRef<int64_t> x) {
  std::vector<int64_t> v(x.begin() + 1, x.end() - 1);
  v.push_back(x.front());
  v.push_back(x.back());
  return v;
}

/// Points cuBLASLt operand `o` (the user's X, whose call offsets are
/// `offsets`) at X stored [R, b..., C] for transBatch: the matrices planned
/// dense (R * C apart) are C apart, rows numel(b) * C apart.
static void useTransBatchLayout(llvm::ArrayRef<int64_t> stored, LtOperand &o,
                                llvm::MutableArrayRef<int64_t *> offsets) {
  int64_t rows = stored.front(), cols = stored.back(), batch = 1;
  for (size_t i = 1; i + 1 < stored.size(); ++i)
    batch *= stored[i];
  // Dense offsets are multiples of R * C; with R = 0 nothing is read.
  int64_t per = rows > 0 ? rows : 1;
  o.batchStride /= per;
  for (int64_t *off : offsets)
    *off /= per;
  o.ld = std::max<int64_t>(batch * cols, 1);
}

llvm::Expected<MatmulPlan> mpc::cuda::planFusedMatmul(const FusedMatmulProblem &p) {
  MatmulProblem q;
  q.elementBytes = p.elementBytes;
  q.transA = p.transA && p.aShape.size() > 1;
  q.transB = p.transB && p.bShape.size() > 1;
  if (!p.transBatchA && !p.transBatchB) {
    q.aShape = p.aShape;
    q.bShape = p.bShape;
    return planMatmul(q);
  }
  auto fail = [&](const llvm::Twine &why) -> llvm::Error {
    return llvm::createStringError(
        std::errc::invalid_argument, "FusedMatMul of %s and %s (transA %d, transB %d, "
        "transBatchA %d, transBatchB %d): %s", shapeText(p.aShape).c_str(),
        shapeText(p.bShape).c_str(), int(p.transA), int(p.transB), int(p.transBatchA),
        int(p.transBatchB), why.str().c_str());
  };
  if (p.aShape.size() < 3 || p.aShape.size() != p.bShape.size())
    return fail("transBatchA/transBatchB need A and B of one rank, 3 or more");
  std::vector<int64_t> a = p.transBatchA ? transBatchView(p.aShape) : p.aShape.vec();
  std::vector<int64_t> b = p.transBatchB ? transBatchView(p.bShape) : p.bShape.vec();
  // planMatmul folds an untransposed A's batch into rows; the transBatch A's
  // rows are not evenly spaced, so it is planned as the transpose of its
  // transpose (the layout is set below either way).
  if (p.transBatchA && !q.transA) {
    std::swap(a[a.size() - 2], a[a.size() - 1]);
    q.transA = true;
  }
  q.aShape = a;
  q.bShape = b;
  llvm::Expected<MatmulPlan> plan = planMatmul(q);
  if (!plan) // planMatmul's reason, without the shapes of the view
    return fail(llvm::StringRef(llvm::toString(plan.takeError())).split(": ").second);
  LtGemm &g = plan->gemm;
  llvm::SmallVector<int64_t *, 8> offA, offB;
  for (LtGemm::Offsets &o : g.offsets) {
    offA.push_back(&o.userA);
    offB.push_back(&o.userB);
  }
  if (p.transBatchA) {
    // cuBLASLt's B: the stored R x C rows are the column-major C x R matrix.
    useTransBatchLayout(p.aShape, g.b, offA);
    g.b.rows = p.aShape.back();
    g.b.cols = p.aShape.front();
    g.b.trans = p.transA;
  }
  if (p.transBatchB)
    useTransBatchLayout(p.bShape, g.a, offB);
  llvm::SmallVector<int64_t, 8> userA, userB;
  for (const LtGemm::Offsets &o : g.offsets) {
    userA.push_back(o.userA);
    userB.push_back(o.userB);
  }
  userA.push_back(g.b.batchStride);
  userB.push_back(g.a.batchStride);
  g.b.alignment = alignmentOf(userA, p.elementBytes);
  g.a.alignment = alignmentOf(userB, p.elementBytes);
  return plan;
}

llvm::Expected<GemmBias> mpc::cuda::planGemmBias(int64_t m, int64_t n, bool hasC,
                                                 llvm::ArrayRef<int64_t> cShape, float beta) {
  if (!hasC || beta == 0.0f)
    return GemmBias::None;
  if (cShape.size() > 2)
    return llvm::createStringError(std::errc::invalid_argument,
                                   "Gemm bias of shape %s has more than 2 axes",
                                   shapeText(cShape).c_str());
  int64_t cn = cShape.empty() ? 1 : cShape.back();
  int64_t cm = cShape.size() < 2 ? 1 : cShape[0];
  if ((cn != 1 && cn != n) || (cm != 1 && cm != m))
    return llvm::createStringError(std::errc::invalid_argument,
                                   "Gemm bias of shape %s does not broadcast to [%lld, %lld]",
                                   shapeText(cShape).c_str(), static_cast<long long>(m),
                                   static_cast<long long>(n));
  if (cm == 1 && cn == n && !cShape.empty() && beta == 1.0f)
    return GemmBias::Epilogue;
  if (cm == m && cn == n)
    return GemmBias::Matrix;
  return GemmBias::ExpandToD;
}

namespace {
constexpr int32_t kOnnxFloat = 1, kOnnxFloat16 = 10, kOnnxBFloat16 = 16;

bool isHalfType(int32_t t) { return t == kOnnxFloat16 || t == kOnnxBFloat16; }

const char *typeText(int32_t t) {
  switch (t) {
  case kOnnxFloat: return "float32";
  case kOnnxFloat16: return "float16";
  case kOnnxBFloat16: return "bfloat16";
  default: return "an unsupported type";
  }
}

uint64_t roundUp256(uint64_t b) { return (b + 255) / 256 * 256; }
} // namespace

llvm::Expected<EpiloguePlan> mpc::cuda::planGemmEpilogue(const EpilogueProblem &p) {
  auto fail = [](const llvm::Twine &why) {
    return llvm::createStringError(std::errc::invalid_argument, "%s", why.str().c_str());
  };
  if (p.aType != kOnnxFloat && !isHalfType(p.aType))
    return fail(llvm::Twine("GemmBiasAct operands of ") + typeText(p.aType));
  bool yOk = p.yType == p.aType || (isHalfType(p.aType) && p.yType == kOnnxFloat) ||
             (p.aType == kOnnxFloat && isHalfType(p.yType));
  if (!yOk)
    return fail(llvm::Twine("GemmBiasAct output of ") + typeText(p.yType) + " for " +
                typeText(p.aType) + " operands");
  if (p.hasBias && p.biasType != p.aType && p.biasType != p.yType)
    return fail(llvm::Twine("GemmBiasAct bias of ") + typeText(p.biasType) + " for " +
                typeText(p.aType) + " operands and a " + typeText(p.yType) + " output");
  if (p.hasBias && p.biasElements != p.n)
    return fail(llvm::formatv("GemmBiasAct bias of {0} elements for N = {1}", p.biasElements,
                              p.n));
  EpiloguePlan plan;
  plan.stageD = p.aType == kOnnxFloat && p.yType != kOnnxFloat;
  plan.dType = plan.stageD ? kOnnxFloat : p.yType;
  if (p.biasGradOf >= 0) {
    if (p.hasBias || p.act != EpilogueAct::None)
      return fail("GemmBiasAct bias_grad with a bias or an activation");
    if (plan.stageD)
      return fail(llvm::Twine("GemmBiasAct bias_grad of ") + typeText(p.yType) +
                  " for float32 operands (D would be staged)");
    plan.epilogue = p.biasGradOf == 1 ? LtEpilogue::BGradA : LtEpilogue::BGradB;
    return plan;
  }
  bool b = p.hasBias;
  switch (p.act) {
  case EpilogueAct::None: plan.epilogue = b ? LtEpilogue::Bias : LtEpilogue::Default; break;
  case EpilogueAct::Relu: plan.epilogue = b ? LtEpilogue::ReluBias : LtEpilogue::Relu; break;
  case EpilogueAct::GeluTanh: plan.epilogue = b ? LtEpilogue::GeluBias : LtEpilogue::Gelu; break;
  case EpilogueAct::Gelu:
    plan.epilogue = b ? LtEpilogue::Bias : LtEpilogue::Default;
    plan.separateGelu = true;
    break;
  }
  plan.castBias = b && p.biasType != plan.dType;
  uint64_t dBytes = plan.dType == kOnnxFloat ? 4 : 2;
  uint64_t at = 0;
  if (plan.castBias) {
    plan.biasOffset = at;
    at += roundUp256(uint64_t(p.n) * dBytes);
  }
  if (plan.stageD) {
    plan.dOffset = at;
    at += roundUp256(uint64_t(p.m) * uint64_t(p.n) * 4);
  }
  plan.extraBytes = at;
  return plan;
}
