//! Commands printed back as shell text (for `jobs` and the script a background job runs).

use brush_parser::ast;

/// Shell text for an and-or list. brush's `Display` writes a compound command's
/// redirections with no space between them (`(cmd) >f 2>&1` would come out as
/// `(cmd)>f2>&1`), so the outer levels, where backgrounded commands carry theirs, are
/// written here.
pub(super) fn and_or_text(list: &ast::AndOrList) -> String {
    let mut s = pipeline_text(&list.first);
    for next in &list.additional {
        match next {
            ast::AndOr::And(p) => s.push_str(&format!(" && {}", pipeline_text(p))),
            ast::AndOr::Or(p) => s.push_str(&format!(" || {}", pipeline_text(p))),
        }
    }
    s
}

fn pipeline_text(p: &ast::Pipeline) -> String {
    if p.timed.is_some() {
        return p.to_string();
    }
    let commands: Vec<String> = p
        .seq
        .iter()
        .map(|c| match c {
            ast::Command::Compound(c, Some(r)) => format!("{c}{}", redirects_text(r)),
            other => other.to_string(),
        })
        .collect();
    let bang = if p.bang { "! " } else { "" };
    format!("{bang}{}", commands.join(" | "))
}

/// ` >f 2>&1`: each redirection after a space.
pub(super) fn redirects_text(r: &ast::RedirectList) -> String {
    r.0.iter().map(|item| format!(" {item}")).collect()
}
