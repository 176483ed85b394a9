//! One vertical scroller for every page that scrolls (help, messages, a target's or a hook's
//! detail, the plan): keys move an offset that never passes the last position that still fills
//! the page, so `G` then `↑` moves at once (an offset parked past the end would need as many
//! presses as it overshot).

use super::action::Action;

/// Where a scrolled page starts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Scroll {
    /// The first row shown.
    pub offset: usize,
}

impl Scroll {
    /// A page at its top.
    pub fn top() -> Scroll {
        Scroll::default()
    }

    /// The last offset that still fills `room` rows of a page of `total` rows.
    pub fn max(total: usize, room: usize) -> usize {
        total.saturating_sub(room.max(1))
    }

    /// The offset to draw from: the stored one, kept inside the page (it may have shrunk since).
    pub fn at(self, total: usize, room: usize) -> usize {
        self.offset.min(Scroll::max(total, room))
    }

    /// Applies a movement key to a page of `total` rows showing `room` at a time; true when the
    /// key was one (others are left to the dialog).
    pub fn apply(&mut self, action: &Action, total: usize, room: usize) -> bool {
        let max = Scroll::max(total, room);
        let page = room.max(1);
        let now = self.offset.min(max);
        self.offset = match action {
            Action::Up => now.saturating_sub(1),
            Action::Down => (now + 1).min(max),
            Action::PageUp => now.saturating_sub(page),
            Action::PageDown => (now + page).min(max),
            Action::Top => 0,
            Action::Bottom => max,
            _ => return false,
        };
        true
    }

    /// `  (12–31 of 80)` when the page does not fit, else nothing.
    pub fn position(self, total: usize, room: usize) -> String {
        if total <= room {
            return String::new();
        }
        let from = self.at(total, room);
        format!("  ({}–{} of {total})", from + 1, (from + room).min(total))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_stops_at_both_ends_and_moves_at_once_after_the_end() {
        let mut s = Scroll::top();
        assert!(s.apply(&Action::Up, 50, 10));
        assert_eq!(s.offset, 0);
        s.apply(&Action::Bottom, 50, 10);
        assert_eq!(s.offset, 40);
        s.apply(&Action::Down, 50, 10);
        assert_eq!(s.offset, 40, "never past the last full page");
        s.apply(&Action::Up, 50, 10);
        assert_eq!(s.offset, 39, "one key, one row, straight after G");
        s.apply(&Action::PageUp, 50, 10);
        assert_eq!(s.offset, 29);
        s.apply(&Action::PageDown, 50, 10);
        s.apply(&Action::PageDown, 50, 10);
        assert_eq!(s.offset, 40);
        s.apply(&Action::Top, 50, 10);
        assert_eq!(s.offset, 0);
        assert!(!s.apply(&Action::Submit, 50, 10));
    }

    #[test]
    fn a_page_that_fits_does_not_move_and_a_shrunk_one_is_drawn_inside() {
        let mut s = Scroll::top();
        s.apply(&Action::Down, 5, 10);
        assert_eq!(s.offset, 0);
        assert_eq!(s.position(5, 10), "");
        let s = Scroll { offset: 30 };
        assert_eq!(s.at(20, 10), 10, "the page got shorter since");
        assert_eq!(s.position(20, 10), "  (11–20 of 20)");
    }
}
