"""Writes the checkpoints beside this file with TensorFlow itself (not needed by the tests).

    pip install tensorflow-cpu && python make_checkpoints.py

v1.ckpt is in the format of Google's released vggish_model.ckpt (Saver V1, one file);
v2.ckpt.index and v2.ckpt.data-00000-of-00001 in today's (Saver V2). Both hold the values that
tests/stimuli/objective/test_tf_checkpoint.py expects, among them a variable partitioned into two slices.
Committed files were written by TensorFlow 2.21.
"""

from pathlib import Path

import numpy as np
import tensorflow as tf

HERE = Path(__file__).resolve().parent

tf.compat.v1.disable_eager_execution()
values = {
    "vggish/conv1/weights": (np.arange(36, dtype=np.float32).reshape(3, 3, 1, 4) - 17.5) / 8,
    "vggish/conv1/biases": np.array([1.5, -2.0, 3.0, 0.25], dtype=np.float32),
    "vggish/fc2/weights": np.sin(np.arange(50 * 7, dtype=np.float32)).reshape(50, 7),
    "scale": np.float64(-0.125),
    "global_step": np.int64(-42),
}
graph = tf.Graph()
with graph.as_default():
    for name, value in values.items():
        tf.compat.v1.get_variable(name, initializer=value)
    parted = tf.compat.v1.get_variable(
        "vggish/fc1/weights",
        shape=(10, 6),
        initializer=tf.compat.v1.zeros_initializer(),
        partitioner=tf.compat.v1.fixed_size_partitioner(2),
    )
    whole = np.cos(np.arange(60, dtype=np.float32)).reshape(10, 6)
    assigns = [part.assign(whole[5 * i : 5 * i + 5]) for i, part in enumerate(parted)]
    init = tf.compat.v1.global_variables_initializer()
    for version in ("V1", "V2"):
        saver = tf.compat.v1.train.Saver(
            write_version=getattr(tf.compat.v1.train.SaverDef, version)
        )
        with tf.compat.v1.Session() as session:
            session.run(init)
            session.run(assigns)
            saver.save(session, str(HERE / f"{version.lower()}.ckpt"), write_meta_graph=False)
(HERE / "checkpoint").unlink(missing_ok=True)
