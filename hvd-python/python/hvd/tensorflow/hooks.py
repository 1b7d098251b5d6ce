"""TensorFlow 1's session hook of Horovod: ``BroadcastGlobalVariablesHook``."""

import tensorflow as tf

from hvd.common.process_sets import global_process_set
from hvd.tensorflow.functions import broadcast_variables


class BroadcastGlobalVariablesHook(tf.compat.v1.train.SessionRunHook):
    """A hook of ``tf.compat.v1.train.MonitoredTrainingSession`` (or any session made
    with hooks) that overwrites every global variable with ``root_rank``'s value once the
    session is created: after the variables are initialised, or restored from a
    checkpoint on the root. ``device`` places the broadcast's ops, as in Horovod."""

    def __init__(self, root_rank, device="", process_set=global_process_set):
        super().__init__()
        self.root_rank = root_rank
        self.bcast_op = None
        self.device = device
        self.process_set = process_set

    def begin(self):
        # The op belongs to the graph being finalised; a new graph needs its own.
        if self.bcast_op is None or self.bcast_op.graph is not tf.compat.v1.get_default_graph():
            with tf.device(self.device):
                self.bcast_op = broadcast_variables(tf.compat.v1.global_variables(),
                                                    self.root_rank, self.process_set)

    def after_create_session(self, session, coord):
        session.run(self.bcast_op)
