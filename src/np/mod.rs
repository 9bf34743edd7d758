//! NumPy parity: array printing (`print(a)`, `repr(a)`), `np.round`, and NumPy's random streams.

mod array;
mod dragon4;
mod format;
mod options;
mod print;
mod random;
mod round;

pub use array::NpArray;
pub use options::{get_printoptions, set_printoptions, PrintOptions};
pub use print::*;
pub use random::*;
pub use round::round;
