// CUDA tactic of LSTM / GRU / RNN: cuDNN's RNN API (cudnnRNNForward, inference mode), "cudnn".
//
// ONNX to cuDNN (rnn_geom.h parses the step):
// - W [dirs, G*H, I] and R [dirs, G*H, H] are copied once at prepare into cuDNN's weight space,
//   gate block by gate block at the addresses cudnnGetRNNWeightParams gives (cuDNN's linear layer
//   k is ONNX gate kGate[k]: LSTM i,f,c,o from ONNX i,o,f,c; GRU r,z,h from ONNX z,r,h); B's Wb and
//   Rb are cuDNN's double bias (CUDNN_RNN_DOUBLE_BIAS), which is exactly ONNX's GRU with
//   linear_before_reset=1 (the reset multiplies R h + Rbh).
// - forward / bidirectional -> CUDNN_UNIDIRECTIONAL / CUDNN_BIDIRECTIONAL; X [seq, batch, I]
//   (layout 0, sequence-major packed) or [batch, seq, I] (layout 1, batch-major unpacked).
// - cuDNN's y is [seq, batch, dirs*H]: ONNX's Y [seq, dirs, batch, H] when dirs or batch is 1,
//   otherwise y goes through the workspace and our transpose kernel. Layout 1's Y [batch, seq,
//   dirs, H] is cuDNN's batch-major y as it is. States [dirs, batch, H] are cuDNN's hx / hy / cx /
//   cy; an omitted initial state is a null pointer (zeros), an unwanted final state likewise.
// - sequence_lens: all seq_length (rnn_geom), uploaded once as cuDNN's devSeqLengths, so that
//   the call reads no host memory and stays inside the engine's CUDA graph.
// fp32 (FMA math, true fp32) or fp16 (tensor cores, fp32 accumulation), all tensors of X's type.
// Not applicable (the host reference runs them): direction reverse, GRU with
// linear_before_reset=0, RNN with Sigmoid, layout 1 with two directions and batch > 1, and what
// rnn_geom refuses for every tactic.
#include <algorithm>
#include <array>
#include <cstring>

#include "kernels/cuda_util.h"
#include "kernels/rnn/rnn_geom.h"

namespace tac::kernels {

namespace {

using rnn::Cell;
using rnn::RnnGeom;

Result<RnnGeom> cudnn_geom(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(RnnGeom g, rnn::rnn_geom(s));
  if (g.dtype != DType::float32 && g.dtype != DType::float16) return not_applicable("fp32 or fp16 only");
  if (g.reverse) return not_applicable("direction reverse (cuDNN runs forward or bidirectional)");
  if (g.cell == Cell::gru && !g.lbr)
    return not_applicable("GRU with linear_before_reset=0 (cuDNN's GRU applies the reset to R h + Rbh)");
  if (g.act == rnn::Act::sigmoid) return not_applicable("RNN with Sigmoid (cuDNN's cells: Tanh or Relu)");
  if (!g.states_plain()) return not_applicable("layout 1 with two directions and batch above 1");
  if (std::max({g.T, g.N, g.I, g.H}) > (int64_t{1} << 30)) return not_applicable("a dimension beyond int32");
  return g;
}

// cuDNN's linear layer k (of one direction's input or recurrent weights) is ONNX gate block kGate[k].
int onnx_gate(Cell c, int k) {
  static constexpr std::array<int, 4> kLstm = {0, 2, 3, 1};  // cuDNN i, f, g, o <- ONNX i, o, f, c
  static constexpr std::array<int, 3> kGru = {1, 0, 2};      // cuDNN r, z, h <- ONNX z, r, h
  return c == Cell::lstm ? kLstm[static_cast<size_t>(k)] : c == Cell::gru ? kGru[static_cast<size_t>(k)] : 0;
}

class CudnnRnn final : public Kernel {
 public:
  ~CudnnRnn() override {
    if (rnn_) cudnnDestroyRNNDescriptor(rnn_);
    if (x_desc_) cudnnDestroyRNNDataDescriptor(x_desc_);
    if (y_desc_) cudnnDestroyRNNDataDescriptor(y_desc_);
    if (h_desc_) cudnnDestroyTensorDescriptor(h_desc_);
  }

  Status init(const StepDesc& s, const RnnGeom& g) {
    g_ = g;
    TAC_ASSIGN_OR_RETURN(c_, cuda::context());
    const bool f16 = g.dtype == DType::float16;
    const cudnnDataType_t dt = f16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
    const int T = static_cast<int>(g.T), N = static_cast<int>(g.N), I = static_cast<int>(g.I), H = static_cast<int>(g.H),
              D = static_cast<int>(g.D);
    TAC_CUDNN_CALL(cudnnCreateRNNDescriptor(&rnn_));
    const cudnnRNNMode_t mode = g.cell == Cell::lstm  ? CUDNN_LSTM
                                : g.cell == Cell::gru ? CUDNN_GRU
                                : g.act == rnn::Act::relu ? CUDNN_RNN_RELU
                                                          : CUDNN_RNN_TANH;
    const cudnnRNNDataLayout_t layout =
        g.layout1 ? CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED : CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED;
    TAC_CUDNN_CALL(cudnnSetRNNDescriptor_v8(
        rnn_, CUDNN_RNN_ALGO_STANDARD, mode, g.has_b ? CUDNN_RNN_DOUBLE_BIAS : CUDNN_RNN_NO_BIAS,
        D == 2 ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT, dt, CUDNN_DATA_FLOAT,
        f16 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH, I, H, H, 1, nullptr,
        g.layout1 ? CUDNN_RNN_PADDED_IO_ENABLED : CUDNN_RNN_PADDED_IO_DISABLED));
    std::vector<int> lens(static_cast<size_t>(N), T);
    TAC_CUDNN_CALL(cudnnCreateRNNDataDescriptor(&x_desc_));
    TAC_CUDNN_CALL(cudnnSetRNNDataDescriptor(x_desc_, dt, layout, T, N, I, lens.data(), nullptr));
    TAC_CUDNN_CALL(cudnnCreateRNNDataDescriptor(&y_desc_));
    TAC_CUDNN_CALL(cudnnSetRNNDataDescriptor(y_desc_, dt, layout, T, N, D * H, lens.data(), nullptr));
    TAC_CUDNN_CALL(cudnnCreateTensorDescriptor(&h_desc_));
    const int dims[3] = {D, N, H}, strides[3] = {N * H, H, 1};
    TAC_CUDNN_CALL(cudnnSetTensorNdDescriptor(h_desc_, dt, 3, dims, strides));
    size_t reserve_bytes = 0;
    TAC_CUDNN_CALL(cudnnGetRNNTempSpaceSizes(c_->dnn, rnn_, CUDNN_FWD_MODE_INFERENCE, x_desc_, &work_bytes_, &reserve_bytes));
    if (reserve_bytes != 0) return internal_error("cuDNN asks for reserve space in inference mode");
    work_bytes_ = (work_bytes_ + 255) / 256 * 256;
    if (!g.want_y || !g.y_plain()) y_tmp_bytes_ = static_cast<size_t>(g.T * g.N * g.D * g.H) * dtype_size(g.dtype);
    if (workspace_bytes() > s.workspace_limit) return workspace_over_limit(workspace_bytes(), s.workspace_limit);

    TAC_ASSIGN_OR_RETURN(Tensor lens_host, Tensor::create(DType::int32, {g.N}));
    std::copy(lens.begin(), lens.end(), lens_host.data<int32_t>());
    TAC_ASSIGN_OR_RETURN(lens_, cuda::upload(lens_host));
    return upload_weights(s);
  }

  size_t workspace_bytes() const override { return work_bytes_ + y_tmp_bytes_; }

  Status run(std::span<const TensorView> in, std::span<const TensorView> out, void* ws) override {
    void* y = g_.want_y && g_.y_plain() ? out[0].data : static_cast<std::byte*>(ws) + work_bytes_;
    const void* h0 = g_.has_h0 ? in[5].data : nullptr;
    const void* c0 = g_.has_c0 ? in[6].data : nullptr;
    void* yh = g_.want_yh ? out[1].data : nullptr;
    void* yc = g_.want_yc ? out[2].data : nullptr;
    TAC_CUDNN_CALL(cudnnRNNForward(c_->dnn, rnn_, CUDNN_FWD_MODE_INFERENCE, static_cast<const int32_t*>(lens_.get()), x_desc_,
                                   in[0].data, y_desc_, y, h_desc_, h0, yh, g_.lstm() ? h_desc_ : nullptr, c0, yc,
                                   weight_bytes_, weights_.get(), work_bytes_, ws, 0, nullptr));
    if (!g_.want_y || g_.y_plain()) return Status::ok();
    // [seq, batch, dirs, H] -> Y [seq, dirs, batch, H]
    cuda::kern::TransposeDesc d;
    d.rank = 4;
    const int64_t out_dims[4] = {g_.T, g_.D, g_.N, g_.H}, in_strides[4] = {g_.N * g_.D * g_.H, g_.H, g_.D * g_.H, 1};
    std::copy(out_dims, out_dims + 4, d.out_dims);
    std::copy(in_strides, in_strides + 4, d.in_strides);
    return cuda::launch_status(cuda::kern::transpose(y, out[0].data, static_cast<int>(dtype_size(g_.dtype)),
                                                     g_.T * g_.D * g_.N * g_.H, d, c_->stream),
                               "transpose kernel (cuDNN's y to ONNX's Y)");
  }

 private:
  // W, R and B into cuDNN's weight space, laid out on the host at the offsets cuDNN reports.
  Status upload_weights(const StepDesc& s) {
    TAC_CUDNN_CALL(cudnnGetRNNWeightSpaceSize(c_->dnn, rnn_, &weight_bytes_));
    TAC_ASSIGN_OR_RETURN(weights_, cuda::DeviceBuffer::allocate(weight_bytes_));
    const size_t e = dtype_size(g_.dtype);
    if (weight_bytes_ % e != 0) return internal_error("cuDNN's RNN weight space is not a whole number of elements");
    TAC_ASSIGN_OR_RETURN(Tensor host, Tensor::create(g_.dtype, {static_cast<int64_t>(weight_bytes_ / e)}));
    std::memset(host.raw(), 0, weight_bytes_);
    cudnnTensorDescriptor_t m_desc = nullptr, b_desc = nullptr;
    TAC_CUDNN_CALL(cudnnCreateTensorDescriptor(&m_desc));
    TAC_CUDNN_CALL(cudnnCreateTensorDescriptor(&b_desc));
    Status st = fill_weights(s, host, m_desc, b_desc);
    cudnnDestroyTensorDescriptor(m_desc);
    cudnnDestroyTensorDescriptor(b_desc);
    TAC_RETURN_IF_ERROR(st);
    TAC_RETURN_IF_ERROR(cuda::copy_to_device(weights_.get(), host.raw(), weight_bytes_));
    return cuda::synchronize();
  }

  Status fill_weights(const StepDesc& s, Tensor& host, cudnnTensorDescriptor_t m_desc, cudnnTensorDescriptor_t b_desc) {
    const Tensor& W = *s.constants[1];
    const Tensor& R = *s.constants[2];
    const Tensor* B = g_.has_b ? s.constants[3] : nullptr;
    const int64_t G = g_.G, H = g_.H;
    const auto* base = static_cast<const std::byte*>(weights_.get());
    const size_t e = dtype_size(g_.dtype);
    for (int64_t dir = 0; dir < g_.D; ++dir)
      for (int64_t id = 0; id < 2 * G; ++id) {
        void *m = nullptr, *b = nullptr;
        TAC_CUDNN_CALL(cudnnGetRNNWeightParams(c_->dnn, rnn_, static_cast<int32_t>(dir), weight_bytes_, weights_.get(),
                                               static_cast<int32_t>(id), m_desc, &m, b_desc, &b));
        const bool recurrent = id >= G;
        const int64_t gate = onnx_gate(g_.cell, static_cast<int>(id % G));
        const Tensor& src = recurrent ? R : W;
        const int64_t cols = recurrent ? H : g_.I;
        if (!m) return internal_error("cuDNN gave no matrix for linear layer " + std::to_string(id));
        const int64_t mo = (static_cast<const std::byte*>(m) - base) / static_cast<int64_t>(e);
        if (mo < 0 || static_cast<size_t>(mo + H * cols) * e > weight_bytes_)
          return internal_error("cuDNN's matrix of linear layer " + std::to_string(id) + " lies outside the weight space");
        // ONNX's gate block rows [gate*H, (gate+1)*H) of direction dir, row-major [H][cols] as cuDNN's.
        const int64_t so = (dir * G * H + gate * H) * cols;
        for (int64_t k = 0; k < H * cols; ++k) host.set_f64(mo + k, src.get_f64(so + k));
        if (!B) continue;
        if (!b) return internal_error("cuDNN gave no bias for linear layer " + std::to_string(id));
        const int64_t bo = (static_cast<const std::byte*>(b) - base) / static_cast<int64_t>(e);
        if (bo < 0 || static_cast<size_t>(bo + H) * e > weight_bytes_)
          return internal_error("cuDNN's bias of linear layer " + std::to_string(id) + " lies outside the weight space");
        const int64_t sb = dir * 2 * G * H + (recurrent ? G * H : 0) + gate * H;  // Wb, then Rb
        for (int64_t k = 0; k < H; ++k) host.set_f64(bo + k, B->get_f64(sb + k));
      }
    return Status::ok();
  }

  RnnGeom g_;
  cuda::Context* c_ = nullptr;
  cudnnRNNDescriptor_t rnn_ = nullptr;
  cudnnRNNDataDescriptor_t x_desc_ = nullptr, y_desc_ = nullptr;
  cudnnTensorDescriptor_t h_desc_ = nullptr;
  cuda::DeviceBuffer weights_, lens_;
  size_t weight_bytes_ = 0, work_bytes_ = 0, y_tmp_bytes_ = 0;
};

Status cudnn_rnn_applies(const StepDesc& s) { return cudnn_geom(s).status(); }

// A launch or two per time step (the recurrent GEMM and the gates) and the input projection as
// one GEMM: latency-bound at small batches.
double cudnn_rnn_cost(const StepDesc& s) {
  auto g = cudnn_geom(s);
  if (!g) return 1e12;
  const double flops = 2.0 * static_cast<double>(g->D * g->T * g->N * g->G * g->H * (g->I + g->H));
  return static_cast<double>(g->T) * 6000.0 + flops / (g->dtype == DType::float16 ? 2e5 : 3e4);
}

Result<std::unique_ptr<Kernel>> cudnn_rnn_prepare(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(RnnGeom g, cudnn_geom(s));
  auto k = std::make_unique<CudnnRnn>();
  TAC_RETURN_IF_ERROR(k->init(s, g));
  return std::unique_ptr<Kernel>(std::move(k));
}

}  // namespace

std::span<const Tactic> cuda_rnn_tactics() {
  static const std::vector<Tactic> table = [] {
    std::vector<Tactic> t;
    for (ir::OpKind op : {ir::OpKind::LSTM, ir::OpKind::GRU, ir::OpKind::RNN})
      t.push_back({"cudnn", op, "cuDNN's RNN (cudnnRNNForward, inference; weights in cuDNN's layout at prepare)",
                   cudnn_rnn_applies, cudnn_rnn_cost, cudnn_rnn_prepare, Backend::cuda});
    return t;
  }();
  return table;
}

}  // namespace tac::kernels
