"""show_with_still: a live widget and a still picture of it in one output."""
import base64
from unittest import mock

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

widgets = pytest.importorskip("ipywidgets")

from course_lib import display as course_display  # noqa: E402


def test_bundle_holds_widget_picture_and_a_note_not_the_repr():
    slider = widgets.FloatSlider(value=1.0)
    fig, ax = plt.subplots()
    ax.plot([0, 1])
    with mock.patch.object(course_display, "display") as shown:
        course_display.show_with_still(slider, fig)
    (bundle,), kwargs = shown.call_args
    assert kwargs == {"raw": True}
    assert bundle[course_display.WIDGET_VIEW]["model_id"] == slider.model_id
    assert base64.b64decode(bundle["image/png"]).startswith(b"\x89PNG")
    assert "FloatSlider(" not in bundle["text/plain"] and "run the notebook" in bundle["text/plain"]
    assert not plt.fignum_exists(fig.number), "the still's figure should be closed, not shown too"


def test_a_non_widget_is_refused_by_name():
    class NotAWidget:
        def _repr_mimebundle_(self):
            return {"text/plain": "x"}

    fig, _ = plt.subplots()
    with pytest.raises(TypeError, match="NotAWidget has no widget view"):
        course_display.show_with_still(NotAWidget(), fig)
    plt.close(fig)
