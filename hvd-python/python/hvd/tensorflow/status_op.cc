// Raises a status of the code and message it is given: hvd's graph collectives report
// a failure as data (a py_function can only raise UnknownError in a graph), and this op
// turns it back into TensorFlow's error class.
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/common_shape_fns.h"

using namespace tensorflow;

REGISTER_OP("HvdRaiseStatus")
    .Input("code: int32")
    .Input("message: string")
    .SetIsStateful()
    .SetShapeFn(shape_inference::NoOutputs);

class HvdRaiseStatusOp : public OpKernel {
 public:
  explicit HvdRaiseStatusOp(OpKernelConstruction* c) : OpKernel(c) {}
  void Compute(OpKernelContext* c) override {
    const int code = c->input(0).scalar<int32>()();
    if (code == 0) return;
    const tstring& message = c->input(1).scalar<tstring>()();
    c->SetStatus(absl::Status(static_cast<absl::StatusCode>(code), std::string(message)));
  }
};

REGISTER_KERNEL_BUILDER(Name("HvdRaiseStatus").Device(DEVICE_CPU), HvdRaiseStatusOp);
