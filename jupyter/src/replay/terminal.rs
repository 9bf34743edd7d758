//! Keeps the progress bar readable on a terminal.
//!
//! evcxr runs in this process and writes `Compiling <crate>` lines of `:dep`
//! builds straight to file descriptor 2, which would tear the progress bar.
//! On a terminal, fd 2 is pointed at a pipe whose lines are printed above the
//! bar (through `ProgressBar::suspend`), and the bar draws on a duplicate of
//! the real stderr. Off a terminal there is no bar and nothing is redirected.

use indicatif::{ProgressBar, ProgressDrawTarget};

/// The progress bar, plus the stderr redirection when there is a terminal.
pub struct Progress {
    /// The bar; hidden when stderr is not a terminal.
    pub bar: ProgressBar,
    #[cfg(unix)]
    redirect: Option<unix::Redirect>,
}

impl Progress {
    /// A bar over `total` cells.
    pub fn new(total: u64) -> Progress {
        #[cfg(unix)]
        {
            if let Some((redirect, target)) = unix::Redirect::start() {
                let bar = ProgressBar::with_draw_target(Some(total), target);
                let mut redirect = redirect;
                redirect.forward_to(bar.clone());
                return Progress {
                    bar,
                    redirect: Some(redirect),
                };
            }
            Progress {
                bar: ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr()),
                redirect: None,
            }
        }
        #[cfg(not(unix))]
        Progress {
            bar: ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr()),
        }
    }

    /// Clears the bar and puts stderr back, flushing forwarded lines.
    pub fn finish(self) {
        drop(self);
    }
}

/// Also on an early return (stdout gone), so that the error line reaches the real stderr.
impl Drop for Progress {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
        #[cfg(unix)]
        if let Some(redirect) = self.redirect.take() {
            redirect.stop();
        }
    }
}

#[cfg(unix)]
mod unix {
    use indicatif::{ProgressBar, ProgressDrawTarget};
    use std::fs::File;
    use std::io::{BufRead, BufReader, Write};
    use std::os::fd::{FromRawFd, RawFd};
    use std::sync::mpsc;
    use std::time::Duration;

    /// fd 2 redirected into a pipe.
    pub(super) struct Redirect {
        saved: RawFd,
        reader: Option<File>,
        done: Option<mpsc::Receiver<()>>,
    }

    impl Redirect {
        /// Redirects fd 2 when it is a terminal; returns the draw target on
        /// the original stderr.
        pub(super) fn start() -> Option<(Redirect, ProgressDrawTarget)> {
            // SAFETY: plain fd calls; every fd created is owned below.
            unsafe {
                if libc::isatty(2) != 1 {
                    return None;
                }
                let saved = libc::dup(2);
                if saved < 0 {
                    return None;
                }
                let draw = libc::dup(saved);
                let mut fds = [0 as RawFd; 2];
                if draw < 0 || libc::pipe(fds.as_mut_ptr()) != 0 {
                    libc::close(saved);
                    if draw >= 0 {
                        libc::close(draw);
                    }
                    return None;
                }
                // Children must not inherit the pipe's read end.
                libc::fcntl(fds[0], libc::F_SETFD, libc::FD_CLOEXEC);
                libc::fcntl(saved, libc::F_SETFD, libc::FD_CLOEXEC);
                libc::fcntl(draw, libc::F_SETFD, libc::FD_CLOEXEC);
                libc::dup2(fds[1], 2);
                libc::close(fds[1]);
                let term =
                    console::Term::read_write_pair(std::io::stdin(), File::from_raw_fd(draw));
                Some((
                    Redirect {
                        saved,
                        reader: Some(File::from_raw_fd(fds[0])),
                        done: None,
                    },
                    ProgressDrawTarget::term(term, 10),
                ))
            }
        }

        /// Prints each redirected line above the bar, on the real stderr.
        pub(super) fn forward_to(&mut self, bar: ProgressBar) {
            let Some(reader) = self.reader.take() else {
                return;
            };
            // SAFETY: dup of `saved`, an fd we own; no memory is involved.
            let out = unsafe { libc::dup(self.saved) };
            if out < 0 {
                return;
            }
            // SAFETY: `out` is the duplicate just made, open and owned by no one else; the File
            // becomes its only owner.
            let mut out = unsafe { File::from_raw_fd(out) };
            let (done_tx, done_rx) = mpsc::channel::<()>();
            self.done = Some(done_rx);
            std::thread::spawn(move || {
                for line in BufReader::new(reader).split(b'\n').map_while(Result::ok) {
                    bar.suspend(|| {
                        let _ = out.write_all(&line);
                        let _ = out.write_all(b"\n");
                    });
                }
                let _ = done_tx.send(());
            });
        }

        /// Restores fd 2; the forwarding thread ends at the pipe's EOF.
        pub(super) fn stop(mut self) {
            let _ = std::io::stderr().flush();
            // SAFETY: `saved` is our duplicate of the original fd 2.
            unsafe {
                libc::dup2(self.saved, 2);
                libc::close(self.saved);
            }
            if let Some(done) = self.done.take() {
                let _ = done.recv_timeout(Duration::from_secs(1));
            }
        }
    }
}
