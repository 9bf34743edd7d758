//! NumPy's print options (`np.set_printoptions`, `np.get_printoptions`) and where they are
//! stored between notebook cells. Printing reads them; nothing here prints.

/// NumPy's print options (`np.set_printoptions`), with NumPy's defaults.
///
/// ```
/// use attention_lab::prelude::*;
/// // np.set_printoptions(precision=1)
/// let opts = PrintOptions { precision: 1, ..Default::default() };
/// assert_eq!(array_str(&array![0.25, 1.0 / 3.0], &opts), "[0.2 0.3]");
/// assert_eq!(PrintOptions::default().linewidth, 75);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrintOptions {
    /// Digits after the decimal point (at most; fewer when the shortest repr is shorter).
    pub precision: usize,
    /// Never switch to scientific notation for small numbers; tiny values print as `0.`.
    pub suppress: bool,
    /// Characters per line before wrapping.
    pub linewidth: usize,
    /// Arrays with more elements than this are summarised with `...`.
    pub threshold: usize,
    /// Items shown at each edge of a summarised axis.
    pub edgeitems: usize,
}

impl PrintOptions {
    /// NumPy's defaults, usable in constants.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// // np.set_printoptions()  (back to the defaults)
    /// set_printoptions(PrintOptions::NUMPY);
    /// assert_eq!(get_printoptions(), PrintOptions::default());
    /// ```
    pub const NUMPY: PrintOptions = PrintOptions {
        precision: 8,
        suppress: false,
        linewidth: 75,
        threshold: 1000,
        edgeitems: 3,
    };
}

impl Default for PrintOptions {
    /// `PrintOptions { precision: 8, suppress: false, linewidth: 75, threshold: 1000, edgeitems: 3 }`.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// // np.get_printoptions()['threshold']
    /// assert_eq!(PrintOptions::default().threshold, 1000);
    /// ```
    fn default() -> Self {
        PrintOptions::NUMPY
    }
}

/// Where the options live: an environment variable of this process. evcxr compiles every
/// notebook cell into its own library, each with its own copy of this crate's statics, so a
/// static would forget `set_printoptions` at the end of the cell; the environment is shared.
const OPTIONS_VAR: &str = "ATTENTION_LAB_PRINTOPTIONS";

impl PrintOptions {
    fn encode(&self) -> String {
        let PrintOptions {
            precision,
            suppress,
            linewidth,
            threshold,
            edgeitems,
        } = self;
        format!("{precision} {suppress} {linewidth} {threshold} {edgeitems}")
    }

    /// The options `encode` wrote, or `None` for anything else.
    fn decode(text: &str) -> Option<PrintOptions> {
        let mut fields = text.split(' ');
        let opts = PrintOptions {
            precision: fields.next()?.parse().ok()?,
            suppress: fields.next()?.parse().ok()?,
            linewidth: fields.next()?.parse().ok()?,
            threshold: fields.next()?.parse().ok()?,
            edgeitems: fields.next()?.parse().ok()?,
        };
        fields.next().is_none().then_some(opts)
    }
}

/// Sets the process-wide options used by [`NpDisplay::np`](super::NpDisplay::np) and [`EvcxrDisplay`](super::EvcxrDisplay).
///
/// ```
/// use attention_lab::prelude::*;
/// // np.set_printoptions(precision=1); print(np.array([0.25, 1.5]))
/// set_printoptions(PrintOptions { precision: 1, ..Default::default() });
/// assert_eq!(array![0.25, 1.5].np().to_string(), "[0.2 1.5]");
/// set_printoptions(PrintOptions::default());
/// ```
pub fn set_printoptions(opts: PrintOptions) {
    std::env::set_var(OPTIONS_VAR, opts.encode());
}

/// The process-wide options, like `np.get_printoptions()`.
///
/// ```
/// use attention_lab::prelude::*;
/// // np.get_printoptions()['edgeitems']
/// assert_eq!(get_printoptions().edgeitems, 3);
/// ```
pub fn get_printoptions() -> PrintOptions {
    std::env::var(OPTIONS_VAR)
        .ok()
        .and_then(|text| PrintOptions::decode(&text))
        .unwrap_or_default()
}
