"""A small ONNX graph builder: one interface, two destinations.

The exporters (:mod:`obliquetrees.onnx._parts`) add nodes and constants
through :class:`GraphBuilder`, which either collects them for a standalone
model (:func:`obliquetrees.onnx.to_onnx`) or writes them into the container
of a skl2onnx conversion (:class:`Skl2OnnxBuilder`, used by the registered
converters), with names kept unique in either case.
"""

import numpy as np
from onnx import TensorProto, helper, numpy_helper

#: The domain of ONNX's classical machine-learning operators.
ML_DOMAIN = "ai.onnx.ml"
#: Lowest main-domain opset the graphs use: ``ReduceSum`` takes its axes as
#: an input and ``Softmax`` normalises along one axis from 13 on.
MIN_OPSET = 13
#: Main-domain opset of :func:`obliquetrees.onnx.to_onnx` by default (run by
#: onnxruntime 1.13 and later).
DEFAULT_OPSET = 17
#: ``TreeEnsembleRegressor`` takes double thresholds and weights (the
#: ``*_as_tensor`` attributes) from version 3 of the ML domain on.
ML_OPSET = 3

ONNX_TYPE = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float64): TensorProto.DOUBLE}


class GraphBuilder:
    """Collects the nodes and constant tensors of one ONNX graph.

    Every name it hands out is unique within the graph; ``hint`` only makes
    the graph readable.
    """

    def __init__(self):
        self.nodes = []
        self.initializers = []
        self._taken = set()

    # -------------------------------------------------------------- naming
    def unique(self, hint):
        """A name not used before in this graph, built from ``hint``."""
        name, k = hint, 1
        while name in self._taken:
            name, k = f"{hint}_{k}", k + 1
        self._taken.add(name)
        return name

    def reserve(self, name):
        """Mark an external name (a graph input or output) as taken."""
        self._taken.add(name)
        return name

    # ------------------------------------------------------------ building
    def const(self, array, hint="c"):
        """Name of a new constant tensor holding ``array``."""
        name = self.unique(hint)
        self._add_initializer(name, np.asarray(array))
        return name

    def op(self, op_type, inputs, hint=None, domain="", outputs=None, **attrs):
        """Add one node; return the name of its (single) output.

        ``outputs`` names the output instead (a graph output).
        """
        output = outputs if outputs is not None else self.unique(hint or op_type.lower())
        self._add_node(op_type, list(inputs), [output], domain, attrs)
        return output

    # ------------------------------------------------- destination (standalone)
    def _add_initializer(self, name, array):
        self.initializers.append(numpy_helper.from_array(array, name))

    def _add_node(self, op_type, inputs, outputs, domain, attrs):
        name = self.unique(f"{op_type}_node")
        self.nodes.append(
            helper.make_node(op_type, inputs, outputs, name=name, domain=domain, **attrs)
        )


class Skl2OnnxBuilder(GraphBuilder):
    """A :class:`GraphBuilder` writing into a skl2onnx conversion.

    Parameters
    ----------
    scope, container
        What skl2onnx passes to a registered converter.
    """

    def __init__(self, scope, container):
        super().__init__()
        self._scope = scope
        self._container = container

    def unique(self, hint):
        return self._scope.get_unique_variable_name(hint)

    def reserve(self, name):
        return name

    def _add_initializer(self, name, array):
        if array.dtype.kind in "US":  # string constants (class labels)
            content = [str(v).encode("utf-8") for v in array.ravel()]
            self._container.add_initializer(name, TensorProto.STRING, list(array.shape), content)
            return
        tensor = numpy_helper.from_array(array, name)
        self._container.add_initializer(name, tensor.data_type, list(array.shape), tensor)

    def _add_node(self, op_type, inputs, outputs, domain, attrs):
        self._container.add_node(
            op_type,
            inputs,
            outputs,
            op_domain=domain,
            op_version=ML_OPSET if domain == ML_DOMAIN else None,
            name=self._scope.get_unique_operator_name(op_type),
            **attrs,
        )
