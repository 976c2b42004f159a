"""Checks the built-in VGGish and OpenL3 against TensorFlow and Keras themselves.

The released weights of both models are TensorFlow files (VGGish: a tf_slim checkpoint in
Saver's first format; OpenL3: Keras 2 HDF5 weights) that cannot be downloaded where the tests
run. This script builds each network as its authors define it (VGGish as Google's vggish_slim,
OpenL3 as openl3's models.py, without the spectrogram front end), with random weights and
batch-norm statistics, saves the weights in the released format, and records the framework's
own embeddings of random inputs. The platform then loads those files with its own readers and
must give the same embeddings. Not part of the test suite: it needs TensorFlow, in an
environment of its own.

    python -m venv /tmp/tf && /tmp/tf/bin/pip install tensorflow-cpu tf_slim tf_keras
    /tmp/tf/bin/python scripts/crosscheck_tensorflow.py write /tmp/crosscheck
    .venv/bin/python scripts/crosscheck_tensorflow.py compare /tmp/crosscheck
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np


def write(folder: Path) -> None:
    os.environ["TF_USE_LEGACY_KERAS"] = "1"  # Keras 2, which wrote OpenL3's weights
    import tensorflow as tf
    import tf_keras
    import tf_slim as slim
    from tf_keras import layers

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)

    # VGGish, as vggish_slim.define_vggish_slim builds it; saved as Saver V1 like the release.
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.disable_eager_execution()
        init = tf.compat.v1.truncated_normal_initializer(stddev=0.05)
        with (
            slim.arg_scope(
                [slim.conv2d, slim.fully_connected],
                weights_initializer=init,
                biases_initializer=tf.compat.v1.random_normal_initializer(stddev=0.1),
                activation_fn=tf.nn.relu,
                trainable=False,
            ),
            slim.arg_scope([slim.conv2d], kernel_size=[3, 3], stride=1, padding="SAME"),
            slim.arg_scope([slim.max_pool2d], kernel_size=[2, 2], stride=2, padding="SAME"),
            tf.compat.v1.variable_scope("vggish"),
        ):
            features = tf.compat.v1.placeholder(tf.float32, shape=(None, 96, 64))
            net = tf.reshape(features, [-1, 96, 64, 1])
            net = slim.conv2d(net, 64, scope="conv1")
            net = slim.max_pool2d(net, scope="pool1")
            net = slim.conv2d(net, 128, scope="conv2")
            net = slim.max_pool2d(net, scope="pool2")
            net = slim.repeat(net, 2, slim.conv2d, 256, scope="conv3")
            net = slim.max_pool2d(net, scope="pool3")
            net = slim.repeat(net, 2, slim.conv2d, 512, scope="conv4")
            net = slim.max_pool2d(net, scope="pool4")
            net = slim.flatten(net)
            net = slim.repeat(net, 2, slim.fully_connected, 4096, scope="fc1")
            embedding = slim.fully_connected(net, 128, scope="fc2", activation_fn=None)
        examples = rng.normal(size=(5, 96, 64)).astype(np.float32)
        saver = tf.compat.v1.train.Saver(write_version=tf.compat.v1.train.SaverDef.V1)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            saver.save(session, str(folder / "vggish_model.ckpt"), write_meta_graph=False)
            np.save(folder / "vggish_examples.npy", examples)
            np.save(folder / "vggish_embeddings.npy", session.run(embedding, {features: examples}))

    # OpenL3 mel256, as openl3's models.py builds it with the librosa front end (spectrogram in).
    x = y = layers.Input(shape=(256, 199, 1), dtype="float32")
    y = layers.BatchNormalization()(y)
    for block, width in enumerate((64, 128, 256, 512)):
        y = layers.Conv2D(width, (3, 3), padding="same")(y)
        y = layers.Activation("relu")(layers.BatchNormalization()(y))
        name = {"name": "audio_embedding_layer"} if block == 3 else {}
        y = layers.Conv2D(width, (3, 3), padding="same", **name)(y)
        if block < 3:
            y = layers.Activation("relu")(layers.BatchNormalization()(y))
            y = layers.MaxPooling2D(pool_size=(2, 2), strides=2)(y)
    model = tf_keras.Model(inputs=x, outputs=y)
    for layer in model.layers:
        if isinstance(layer, layers.BatchNormalization):
            size = layer.get_weights()[0].shape
            layer.set_weights(
                [
                    rng.uniform(0.5, 1.5, size),
                    rng.normal(0, 0.1, size),
                    rng.normal(0, 0.5, size),
                    rng.uniform(0.5, 2.0, size),
                ]
            )
        elif isinstance(layer, layers.Conv2D):
            kernel, bias = layer.get_weights()
            layer.set_weights([kernel, rng.normal(0, 0.05, bias.shape)])
    model.save_weights(str(folder / "openl3_audio_mel256_music.h5"))
    spectrograms = rng.uniform(-80, 0, size=(3, 256, 199, 1)).astype(np.float32)
    np.save(folder / "openl3_spectrograms.npy", spectrograms)
    for size, pool in ((512, (32, 24)), (6144, (8, 8))):
        pooled = layers.Flatten()(layers.MaxPooling2D(pool_size=pool, padding="same")(model.output))
        out = tf_keras.Model(inputs=model.input, outputs=pooled).predict(spectrograms, verbose=0)
        np.save(folder / f"openl3_embeddings_{size}.npy", out)
    print(f"written to {folder} by TensorFlow {tf.__version__}")


def compare(folder: Path) -> int:
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from stimuli.objective.embeddings import openl3, vggish

    failures = 0

    def report(label: str, got: np.ndarray, expected: np.ndarray, tolerance: float) -> None:
        nonlocal failures
        error = np.abs(got - expected).max() / np.abs(expected).max()
        ok = got.shape == expected.shape and error <= tolerance
        failures += not ok
        print(f"  {label:34s} {error:.1e} of the largest value  {'ok' if ok else 'DIFFERENT'}")

    print("the platform's readers and networks against TensorFlow's own embeddings:")
    model = vggish.load_model(str(folder / "vggish_model.ckpt"), device="cpu")
    with torch.inference_mode():
        got = model.net(torch.from_numpy(np.load(folder / "vggish_examples.npy"))).numpy()
    report("VGGish from vggish_model.ckpt", got, np.load(folder / "vggish_embeddings.npy"), 1e-5)

    params = openl3.read_weights(folder / "openl3_audio_mel256_music.h5")
    spectrograms = torch.from_numpy(np.load(folder / "openl3_spectrograms.npy"))
    for size in (512, 6144):
        net = openl3.OpenL3Net("mel256", size)
        net.load_folded(params)
        with torch.inference_mode():
            got = net.eval()(spectrograms.permute(0, 3, 1, 2).contiguous()).numpy()
        expected = np.load(folder / f"openl3_embeddings_{size}.npy")
        report(f"OpenL3 mel256 {size} from Keras .h5", got, expected, 1e-5)
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=["write", "compare"])
    parser.add_argument("folder", type=Path)
    args = parser.parse_args()
    if args.step == "write":
        write(args.folder)
        return 0
    return compare(args.folder)


if __name__ == "__main__":
    sys.exit(main())
