"""Show a live widget together with a still picture of it, for views where widgets cannot run."""
import base64
import io

from IPython.display import display

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def png_of(fig, close=True):
    """The figure as PNG bytes (closed afterwards, so the notebook does not also show it)."""
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", bbox_inches="tight")
    if close:
        plt.close(fig)
    return buffer.getvalue()


def show_with_still(widget, still_fig, note="(run the notebook to move the sliders)"):
    """Display `widget`, carrying a PNG of `still_fig` in the same output.

    A front end that can run the widget (JupyterLab or Notebook with a live kernel) shows the
    widget. One that cannot (a notebook opened before it is run, GitHub, nbviewer, a PDF) falls
    back to the richest other format in the output, the picture, instead of the widget's raw
    repr text such as "interactive(children=(FloatSlider(...".
    """
    bundle = widget._repr_mimebundle_()
    if WIDGET_VIEW not in bundle:
        raise TypeError(f"{type(widget).__name__} has no widget view to display; "
                        f"pass an ipywidgets widget, e.g. widgets.interactive(...)")
    display({WIDGET_VIEW: bundle[WIDGET_VIEW],
             "image/png": base64.b64encode(png_of(still_fig)).decode("ascii"),
             "text/plain": note}, raw=True)
