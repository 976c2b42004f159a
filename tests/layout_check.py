"""What every page must show in the browser: the site's layout around it and no table wider than
its box (a table may scroll inside a box of its own, but neither it nor that box pokes out)."""

from __future__ import annotations

from pathlib import Path

DOCS_SCREENSHOTS = Path(__file__).resolve().parent.parent / "docs" / "screenshots"
DESKTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}

# For each table: its own width and the width it may take, that of the nearest box that scrolls
# sideways (whose right edge must then lie inside main; strictly, the table too must fit it) or
# else its parent's content box.
OVERFLOWING_TABLES = """(strict) => {
  const main = document.querySelector('main').getBoundingClientRect();
  const problems = [];
  for (const table of document.querySelectorAll('main table')) {
    if (!table.offsetParent) continue;  // in a closed <details>
    let box = table.parentElement, scrolls = false;
    for (let el = table.parentElement; el && el !== document.body; el = el.parentElement) {
      const overflow = getComputedStyle(el).overflowX;
      if (overflow === 'auto' || overflow === 'scroll') { box = el; scrolls = true; break; }
    }
    const t = table.getBoundingClientRect(), b = box.getBoundingClientRect();
    const name = table.id || table.dataset.track || table.className || table.caption?.innerText || 'table';
    if (scrolls) {
      if (b.right > main.right + 1) problems.push(`${name}: its box ends at ${b.right}, main at ${main.right}`);
      // Strict: a box that scrolls is no excuse, every column shows.
      if (strict && t.width > b.width + 1) problems.push(`${name}: ${Math.round(t.width)} px scrolling in a ${Math.round(b.width)} px box`);
    } else {
      const style = getComputedStyle(box);
      const inner = box.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
      if (t.width > inner + 1) problems.push(`${name}: ${Math.round(t.width)} px in a ${Math.round(inner)} px box`);
    }
  }
  if (document.documentElement.scrollWidth > window.innerWidth + 1)
    problems.push(`the page scrolls sideways: ${document.documentElement.scrollWidth} px in ${window.innerWidth}`);
  return problems;
}"""


def assert_in_layout(page) -> None:
    """The page has the site's header and stylesheet, and every table fits its box."""
    assert page.locator("header.site nav .brand").count() == 1, page.url
    background = page.eval_on_selector("body", "el => getComputedStyle(el).backgroundColor")
    assert background == "rgb(251, 251, 252)", f"{page.url} is not styled"
    problems = page.evaluate(OVERFLOWING_TABLES, False)
    assert problems == [], f"{page.url} at {page.viewport_size['width']} px: {problems}"


def overflows(page) -> list[str]:
    """What pokes out of its box, strictly: a table wider than its box even where the box
    scrolls (a column a person must scroll sideways to find), and a page wider than the
    window."""
    return page.evaluate(OVERFLOWING_TABLES, True)
