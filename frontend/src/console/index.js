/**
 * Progressive enhancements for the console's server-rendered pages. Every behaviour is
 * switched on by a data attribute (the CSP forbids inline script and event handlers), and
 * every page works without them.
 *
 *   [data-progress-url]       polls the URL ({status, progress: {done, total}}) every
 *                             data-progress-interval ms (default 1000) until a final status
 *                             (those the server lists as final in #kindgi-job-statuses);
 *                             updates the <progress>/[data-progress-bar], [data-progress-text]
 *                             and [data-progress-status] inside; reloads the page at the end
 *                             when data-progress-reload is present.
 *   [data-select-all="name"]  a checkbox that checks every input[type=checkbox][name=name] of
 *                             its form; [data-selected-count="name"] shows how many are checked,
 *                             [data-requires-selection="name"] buttons are disabled at zero.
 *   [data-auto-submit]        a select/input (or a form: every field in it) that submits its
 *                             form on change (text inputs after a short pause).
 *   [data-tenant-switcher]    a select that submits its form on change.
 *   [data-copy-target="id"]   a button that copies the text (or value) of #id to the clipboard;
 *                             [data-copy-text="…"] copies that text.
 *   [data-confirm="message"]  asks before a form submits or a link is followed.
 *   [data-dismiss]            a button that removes its closest [data-dismissable] element.
 *   [data-kind-switch]        a select whose form shows only the fieldset [data-for-kind] of the
 *                             chosen value (the others are hidden and their fields disabled).
 *   [data-shortcut="j"]       pressing j (outside text boxes) clicks it, or focuses a text box.
 * And always: a table or code block whose content scrolls inside it (a wide table on a narrow
 * window, a long document) can be reached and scrolled from the keyboard (tabindex 0) while,
 * and only while, it scrolls.
 */

/** The statuses a job ends in, as the server says (#kindgi-job-statuses: [{value, label, final}]). */
function finalStatuses() {
  const element = document.getElementById("kindgi-job-statuses");
  let statuses = [];
  try {
    statuses = element ? JSON.parse(element.textContent) : [];
  } catch {
    statuses = [];
  }
  return new Set((Array.isArray(statuses) ? statuses : []).filter((status) => status.final).map((status) => status.value));
}

const FINAL_STATUSES = finalStatuses();

function setText(root, selector, text) {
  root.querySelectorAll(selector).forEach((element) => {
    element.textContent = text;
  });
}

function renderProgress(root, data) {
  const done = Number((data.progress && data.progress.done) || 0);
  const total = Number((data.progress && data.progress.total) || 0);
  const percent = total > 0 ? Math.min(100, Math.round((done / total) * 100)) : data.status && FINAL_STATUSES.has(data.status) ? 100 : 0;
  root.querySelectorAll("progress").forEach((bar) => {
    bar.max = 100;
    bar.value = percent;
    bar.textContent = `${percent}%`;
  });
  root.querySelectorAll("[data-progress-bar]").forEach((bar) => {
    bar.style.width = `${percent}%`;
    bar.setAttribute("aria-valuenow", String(percent));
  });
  setText(root, "[data-progress-text]", total > 0 ? `${done} / ${total} (${percent}%)` : `${percent}%`);
  setText(root, "[data-progress-percent]", `${percent}%`);
  if (data.status) {
    // With one progress bar on the page, every status pill of the page follows it (the run's card too).
    const scope = document.querySelectorAll("[data-progress-url]").length === 1 ? document : root;
    scope.querySelectorAll("[data-progress-status]").forEach((element) => {
      element.textContent = data.status;
      element.className = element.className.replace(/\bpill--[\w-]+/g, "").trim() + ` pill--${data.status}`;
    });
    root.dataset.status = data.status;
  }
}

function watchProgress(root) {
  const url = root.dataset.progressUrl;
  const interval = Math.max(250, Number(root.dataset.progressInterval) || 1000);
  let failures = 0;
  const poll = async () => {
    try {
      const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
      if (!response.ok) throw new Error(String(response.status));
      const data = await response.json();
      failures = 0;
      renderProgress(root, data);
      if (data.status && FINAL_STATUSES.has(data.status)) {
        root.dispatchEvent(new CustomEvent("kindgi:progress-final", { bubbles: true, detail: data }));
        if ("progressReload" in root.dataset) window.location.reload();
        return;
      }
    } catch {
      failures += 1;
      if (failures >= 5) {
        setText(root, "[data-progress-error]", "Lost contact with the console; reload the page to see the latest state.");
        return;
      }
    }
    window.setTimeout(poll, interval * (failures + 1));
  };
  poll();
}

function boxesNamed(scope, name) {
  return [...scope.querySelectorAll(`input[type="checkbox"][name="${CSS.escape(name)}"]`)].filter((box) => !box.disabled);
}

function refreshSelection(scope, name) {
  const boxes = boxesNamed(scope, name);
  const checked = boxes.filter((box) => box.checked).length;
  document.querySelectorAll(`[data-selected-count="${CSS.escape(name)}"]`).forEach((element) => {
    element.textContent = checked ? `${checked} selected` : "";
  });
  document.querySelectorAll(`[data-requires-selection="${CSS.escape(name)}"]`).forEach((element) => {
    element.disabled = checked === 0;
  });
  scope.querySelectorAll(`[data-select-all="${CSS.escape(name)}"]`).forEach((master) => {
    master.checked = boxes.length > 0 && checked === boxes.length;
    master.indeterminate = checked > 0 && checked < boxes.length;
  });
}

function enableSelectAll(master) {
  const name = master.dataset.selectAll;
  const scope = master.form || document;
  master.addEventListener("change", () => {
    boxesNamed(scope, name).forEach((box) => {
      box.checked = master.checked;
    });
    refreshSelection(scope, name);
  });
  scope.addEventListener("change", (event) => {
    if (event.target.name === name) refreshSelection(scope, name);
  });
  refreshSelection(scope, name);
}

function submitForm(form) {
  if (typeof form.requestSubmit === "function") form.requestSubmit();
  else form.submit();
}

function enableAutoSubmit(element) {
  const form = element.form || element.closest("form");
  if (!form) return;
  let timer = 0;
  element.addEventListener("change", (event) => {
    if (event.target.type !== "text" && event.target.type !== "search") submitForm(form);
  });
  element.addEventListener("input", (event) => {
    if (event.target.type !== "text" && event.target.type !== "search") return;
    window.clearTimeout(timer);
    timer = window.setTimeout(() => submitForm(form), 500);
  });
  form.querySelectorAll("[data-auto-submit-hide]").forEach((button) => {
    button.hidden = true;
  });
}

async function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) {
    await navigator.clipboard.writeText(text);
    return;
  }
  // Plain-HTTP local runs have no Clipboard API: fall back to a selected textarea.
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.className = "visually-hidden";
  document.body.appendChild(area);
  area.select();
  document.execCommand("copy");
  area.remove();
}

function enableCopy(button) {
  button.addEventListener("click", async () => {
    const target = button.dataset.copyTarget && document.getElementById(button.dataset.copyTarget);
    const text = button.dataset.copyText || (target ? target.value || target.textContent : "");
    const label = button.textContent;
    try {
      await copyText(text.trim());
      button.textContent = "Copied";
    } catch {
      button.textContent = "Copy failed: select and copy by hand";
    }
    window.setTimeout(() => {
      button.textContent = label;
    }, 2000);
  });
}

function enableConfirm() {
  document.addEventListener(
    "submit",
    (event) => {
      const form = event.target;
      const submitter = event.submitter;
      const message = (submitter && submitter.dataset.confirm) || form.dataset.confirm;
      if (message && !window.confirm(message)) event.preventDefault();
    },
    true,
  );
  document.addEventListener("click", (event) => {
    const link = event.target.closest && event.target.closest("a[data-confirm]");
    if (link && !window.confirm(link.dataset.confirm)) event.preventDefault();
  });
}

function enableDismiss(button) {
  button.addEventListener("click", () => {
    const box = button.closest("[data-dismissable]");
    if (box) box.remove();
  });
}

const TYPING = new Set(["INPUT", "TEXTAREA", "SELECT"]);

/**
 * Single-key shortcuts: a key press clicks the [data-shortcut="key"] button or link, or
 * focuses it when it is a text box. Keys do nothing while a text box has the focus (Escape
 * leaves it), nor with a modifier, so typing a note never reviews anything.
 */
function enableShortcuts() {
  document.addEventListener("keydown", (event) => {
    const target = event.target;
    if (TYPING.has(target.tagName) || target.isContentEditable) {
      if (event.key === "Escape") target.blur();
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey || event.key.length !== 1) return;
    const element = document.querySelector(`[data-shortcut="${CSS.escape(event.key.toLowerCase())}"]`);
    if (!element || element.disabled) return;
    event.preventDefault();
    if (TYPING.has(element.tagName)) element.focus();
    else element.click();
  });
}

const SCROLLABLE = ".table-wrap, .card__body--flush, pre.code-block, pre";

/** Gives each region that scrolls a place in the tab order, and takes it back once it fits. */
function markScrollableRegions(root = document) {
  root.querySelectorAll(SCROLLABLE).forEach((region) => {
    const scrolls = region.scrollWidth > region.clientWidth + 1 || region.scrollHeight > region.clientHeight + 1;
    const style = getComputedStyle(region);
    const canScroll = ["auto", "scroll"].includes(style.overflowX) || ["auto", "scroll"].includes(style.overflowY);
    if (scrolls && canScroll) {
      if (!region.hasAttribute("tabindex")) {
        region.setAttribute("tabindex", "0");
        region.dataset.scrollFocus = "";
      }
    } else if ("scrollFocus" in region.dataset) {
      region.removeAttribute("tabindex");
      delete region.dataset.scrollFocus;
    }
  });
}

function watchScrollableRegions() {
  markScrollableRegions();
  let pending = 0;
  window.addEventListener("resize", () => {
    window.clearTimeout(pending);
    pending = window.setTimeout(() => markScrollableRegions(), 150);
  });
}

function enableKindSwitch(select) {
  const form = select.form || document;
  const show = () => {
    form.querySelectorAll("[data-for-kind]").forEach((fieldset) => {
      const shown = fieldset.getAttribute("data-for-kind") === select.value;
      fieldset.hidden = !shown;
      fieldset.disabled = !shown;
    });
  };
  select.addEventListener("change", show);
  show();
}

function enhance(root = document) {
  root.querySelectorAll("[data-progress-url]").forEach(watchProgress);
  root.querySelectorAll("[data-select-all]").forEach(enableSelectAll);
  root.querySelectorAll("[data-auto-submit], [data-tenant-switcher]").forEach(enableAutoSubmit);
  root.querySelectorAll("[data-copy-target], [data-copy-text]").forEach(enableCopy);
  root.querySelectorAll("[data-dismiss]").forEach(enableDismiss);
  root.querySelectorAll("[data-kind-switch]").forEach(enableKindSwitch);
}

enableConfirm();
enableShortcuts();
document.documentElement.classList.add("js");
if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", () => enhance());
else enhance();
if (document.readyState === "complete") watchScrollableRegions();
else window.addEventListener("load", watchScrollableRegions);
