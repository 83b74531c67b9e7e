//! Frame names and the size of a profile as the store keeps them: names cleaned for the
//! folded format and cut, and a profile's folded stacks capped.

use scalprof_model::FoldedStack;

/// Folded-stack frames may not contain `;` (the separator) or newlines.
pub(super) fn sanitize(name: &str) -> String {
    let name = cut(name, MAX_FRAME_NAME);
    if name.contains([';', '\n']) {
        name.replace([';', '\n'], ":")
    } else {
        name.into_owned()
    }
}

/// The longest frame name in a folded stack (longer ones are cut and marked): C++ templates
/// run to a few hundred characters; a binary can name a function with thousands.
pub(super) const MAX_FRAME_NAME: usize = 512;
/// The most text a profile's folded stacks may hold: the lightest stacks beyond it are
/// summed into one, so a run never adds hundreds of megabytes to the store.
pub(super) const MAX_FOLDED_BYTES: usize = 16 << 20;
/// The stack that holds what the cap left out.
pub const BEYOND_CAP: &str = "[more stacks, beyond the size cap]";

pub(super) fn cut(name: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if name.len() <= max {
        return name.into();
    }
    let mut end = max;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &name[..end]).into()
}

/// Keeps the heaviest stacks (`folded` is sorted heaviest first) up to `max` bytes of text,
/// and sums the rest into one [`BEYOND_CAP`] stack.
pub(super) fn cap_folded(folded: &mut Vec<FoldedStack>, max: usize) {
    let mut bytes = 0usize;
    let Some(keep) = folded.iter().position(|f| {
        bytes += f.stack.len() + 1;
        bytes > max
    }) else {
        return;
    };
    let rest: Vec<FoldedStack> = folded.drain(keep..).collect();
    folded.push(FoldedStack {
        stack: BEYOND_CAP.into(),
        samples: rest.iter().map(|f| f.samples).sum(),
        weight: rest.iter().map(|f| f.weight).sum(),
    });
}
