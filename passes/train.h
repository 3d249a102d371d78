/* train.h - turns an inference graph into the training step whose memory memplan plans.
 *
 *   mp_train_opts o = mp_train_defaults();          // AdamW, fp32, auto loss, 1 micro-batch
 *   o.optimizer = MP_OPT_ADAM;
 *   if (mp_train_build(g, &o, &err)) ...            // g: imported, bound and inferred
 *
 * The step is built in place: loss nodes (phase LOSS), backward nodes from each
 * op's gradient rule (phase BACKWARD), optimizer nodes (phase OPTIMIZER) are
 * appended after the forward nodes, so node order is a valid schedule. Every
 * value gets a role (ir.h mp_role); in-place updates (gradient accumulation,
 * optimizer updates of parameters and moments) set value->alias. All new
 * nodes are shape-inferred, so every value's bytes are known.
 */
#ifndef MP_TRAIN_H
#define MP_TRAIN_H

#include "ir/ir.h"

typedef enum mp_loss_kind { MP_LOSS_AUTO = 0, MP_LOSS_XENT, MP_LOSS_MSE, MP_LOSS_SUM } mp_loss_kind;
typedef enum mp_opt_kind { MP_OPT_SGD = 0, MP_OPT_MOMENTUM, MP_OPT_ADAM, MP_OPT_ADAMW, MP_OPT_ADAFACTOR } mp_opt_kind;

typedef struct mp_train_opts {
    mp_loss_kind loss;
    mp_opt_kind optimizer;
    mp_dtype precision;       /* MP_FLOAT, MP_BFLOAT16 or MP_FLOAT16 (fp32 master weights and state) */
    int micro_batches;        /* gradient accumulation steps, >= 1 */
    bool params_as_inputs;    /* float graph inputs other than data inputs are parameters */
    const char *const *data_inputs; /* names of the data inputs (implies params_as_inputs); NULL-terminated or NULL */
    const char *const *buffers; /* extra value names that are buffers, not parameters; NULL-terminated or NULL */
    bool constants_as_params; /* float Constant nodes of 2+ elements are initializers (weights exported as Constants) */
    bool optimizer_in_backward; /* each update runs as soon as its gradient is final, not after the whole
                                 * backward (mp_graph_hoist_phase): the gradient dies there */
} mp_train_opts;

mp_train_opts mp_train_defaults(void);

/* Builds the step; fails naming the node when an op has no gradient rule, the
 * loss cannot apply to the output, or the model has no parameters. */
int mp_train_build(mp_graph *g, const mp_train_opts *o, mp_err *err);

/* Marks parameters, buffers, constants and data inputs of an imported graph
 * (value->role), as inspect reports them; mp_train_build calls it first.
 * With constants_as_params it first turns those Constant nodes into
 * initializers (the graph loses the nodes; ONNX gives both one meaning). */
int mp_train_classify(mp_graph *g, const mp_train_opts *o, mp_err *err);

/* Lets a value take the buffer of one that dies where it is made: a backward
 * reshape of a gradient becomes a view of it, and the loss's and softmax's
 * gradients write over their dying input (docs/training.md). mp_train_build
 * calls it; call it again after a value stops being a step output. */
int mp_train_share_buffers(mp_graph *g, mp_err *err);

/* Forward values the backward reads (saved activations, parameters excluded). */
bool mp_value_is_saved(const mp_graph *g, int32_t v);

#endif
