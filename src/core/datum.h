// A runtime value: what flows along a graph edge when a model runs. Almost always a tensor;
// ONNX also has sequences of tensors and optionals (an empty optional is Kind::none).
#pragma once

#include <vector>

#include "tactician/tensor.h"

namespace tac {

struct Datum {
  enum class Kind { tensor, sequence, none };
  Kind kind = Kind::tensor;
  Tensor tensor;                 // kind == tensor
  std::vector<Tensor> sequence;  // kind == sequence
  DType elem_dtype = DType::undefined;  // element type of a sequence / none (may be undefined)

  Datum() = default;
  Datum(Tensor t) : kind(Kind::tensor), tensor(std::move(t)) {}  // NOLINT: implicit
  static Datum make_sequence(std::vector<Tensor> items, DType elem) {
    Datum d;
    d.kind = Kind::sequence;
    d.sequence = std::move(items);
    d.elem_dtype = elem;
    return d;
  }
  static Datum make_none(DType elem = DType::undefined) {
    Datum d;
    d.kind = Kind::none;
    d.elem_dtype = elem;
    return d;
  }
  bool is_tensor() const { return kind == Kind::tensor && !tensor.empty(); }
};

}  // namespace tac
