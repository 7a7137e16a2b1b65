// FusedElementwise (made by the fuse_elementwise pass): the whole chain applied to one block of
// elements at a time, the running value kept in a per-thread, L1-sized buffer, each link one call
// of the elementwise family's vectorised unary / binary routines. Memory sees the inputs once and
// the output once, instead of every intermediate written and read back.
#include <omp.h>

#include <algorithm>

#include "ir/elementwise_chain.h"
#include "kernels/elementwise/common.h"

namespace tac::kernels {

namespace {

constexpr int64_t kBlock = 2048;  // floats: 8 KiB, with an input block or two well inside L1

struct Link {
  bool binary = false;
  ew::UnaryOp unary = ew::UnaryOp::copy;
  ew::BinaryOp bin = ew::BinaryOp::add;
  ir::ChainOp::Operand lhs, rhs;
};

Result<std::vector<Link>> links_of(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(std::vector<ir::ChainOp> ops, ir::parse_chain(*s.node));
  for (size_t i = 0; i < s.in_dtypes.size(); ++i) {
    if (s.in_dtypes[i] != DType::float32) return not_applicable("float32 only");
    if (s.in_shapes[i] != s.in_shapes[0]) return not_applicable("every input must have X's shape");
  }
  std::vector<Link> out;
  for (const ir::ChainOp& op : ops) {
    Link l;
    l.binary = op.binary;
    l.lhs = op.lhs;
    l.rhs = op.rhs;
    using K = ir::ChainOp::Kind;
    switch (op.kind) {
      case K::Relu: l.unary = ew::UnaryOp::relu; break;
      case K::Sigmoid: l.unary = ew::UnaryOp::sigmoid; break;
      case K::Tanh: l.unary = ew::UnaryOp::tanh; break;
      case K::Exp: l.unary = ew::UnaryOp::exp; break;
      case K::Neg: l.unary = ew::UnaryOp::neg; break;
      case K::Abs: l.unary = ew::UnaryOp::abs; break;
      case K::Sqrt: l.unary = ew::UnaryOp::sqrt; break;
      case K::Reciprocal: l.unary = ew::UnaryOp::reciprocal; break;
      case K::Erf: l.unary = ew::UnaryOp::erf; break;
      case K::Add: l.bin = ew::BinaryOp::add; break;
      case K::Sub: l.bin = ew::BinaryOp::sub; break;
      case K::Mul: l.bin = ew::BinaryOp::mul; break;
      case K::Div: l.bin = ew::BinaryOp::div; break;
      case K::Max: l.bin = ew::BinaryOp::max; break;
      case K::Min: l.bin = ew::BinaryOp::min; break;
    }
    out.push_back(l);
  }
  return out;
}

template <ew::Isa I>
Status chain_applies(const StepDesc& s) {
  TAC_RETURN_IF_ERROR(ew::isa_applies(I));
  return links_of(s).status();
}

template <ew::Isa I>
double chain_cost(const StepDesc& s) {
  const double n = static_cast<double>(shape_numel(s.out_shapes.empty() ? Shape{} : s.out_shapes[0]));
  const double links = s.node->attr("ops") ? static_cast<double>(s.node->attr("ops")->strings.size()) : 1;
  const double per_elem = (I == ew::Isa::avx512 ? 0.05 : 0.1) * links + 0.1 * static_cast<double>(s.in_shapes.size() + 1);
  return 200 + n * per_elem / std::max(1, s.threads);
}

template <ew::Isa I>
Result<std::unique_ptr<Kernel>> chain_prepare(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(std::vector<Link> links, links_of(s));
  const int64_t n = shape_numel(s.in_shapes[0]);
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  const int threads = static_cast<int>(std::clamp<int64_t>(std::min<int64_t>(s.threads, blocks), 1, 1024));
  const ew::IsaKernels& ek = ew::isa_kernels(I);
  auto run = [links, n, blocks, threads, &ek](std::span<const TensorView> in, std::span<const TensorView> out,
                                              void* ws) -> Status {
    float* y = out[0].as<float>();
    auto block = [&](int64_t b, float* tmp) {
      const int64_t o = b * kBlock, len = std::min(kBlock, n - o);
      const float* cur = in[0].as<const float>() + o;
      for (size_t i = 0; i < links.size(); ++i) {
        float* dst = i + 1 == links.size() ? y + o : tmp;
        const Link& l = links[i];
        if (!l.binary) {
          ek.unary(l.unary, cur, dst, len, 0, 0);
        } else {
          auto ptr = [&](const ir::ChainOp::Operand& op, int& stride) -> const float* {
            stride = 1;
            if (op.from == ir::ChainOp::Operand::From::x) return cur;
            if (op.from == ir::ChainOp::Operand::From::input) return in[static_cast<size_t>(op.input)].as<const float>() + o;
            stride = 0;
            return &op.value;
          };
          int sa = 1, sb = 1;
          const float* a = ptr(l.lhs, sa);
          const float* bb = ptr(l.rhs, sb);
          ek.binary(l.bin, a, bb, dst, len, sa, sb);
        }
        cur = dst;
      }
    };
    float* tmp = static_cast<float*>(ws);
    if (threads <= 1) {
      for (int64_t b = 0; b < blocks; ++b) block(b, tmp);
    } else {
#pragma omp parallel for num_threads(threads) schedule(static)
      for (int64_t b = 0; b < blocks; ++b) block(b, tmp + static_cast<int64_t>(omp_get_thread_num()) * kBlock);
    }
    return Status::ok();
  };
  return ew::make_kernel(std::move(run), static_cast<size_t>(threads * kBlock) * sizeof(float));
}

const std::vector<Tactic>& table() {
  static const std::vector<Tactic> t = {
      {"avx512", ir::OpKind::FusedElementwise, "the chain per 8 KiB block in an L1-resident buffer (AVX-512)",
       chain_applies<ew::Isa::avx512>, chain_cost<ew::Isa::avx512>, chain_prepare<ew::Isa::avx512>},
      {"avx2", ir::OpKind::FusedElementwise, "the chain per 8 KiB block in an L1-resident buffer (AVX2)",
       chain_applies<ew::Isa::avx2>, chain_cost<ew::Isa::avx2>, chain_prepare<ew::Isa::avx2>},
  };
  return t;
}

}  // namespace

std::span<const Tactic> chain_tactics() { return table(); }

}  // namespace tac::kernels
