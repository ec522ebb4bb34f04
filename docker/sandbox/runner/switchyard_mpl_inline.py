"""matplotlib backend of the python kernel (MPLBACKEND=module://switchyard_mpl_inline): Agg, whose show() displays.

`plt.show()` gives every open figure to the cell's rich results as a PNG and closes it (kernel_display.py); figures
left open are shown the same way when the cell ends. Found by kernel_display's InlineBackendFinder.
"""

import kernel_display
from matplotlib.backend_bases import FigureManagerBase
from matplotlib.backends.backend_agg import FigureCanvasAgg

FigureCanvas = FigureCanvasAgg
FigureManager = FigureManagerBase


def show(*_args, **_kwargs):
    kernel_display.show_figures()
