/**
 * The JSON view of the guardrail editor: a CodeMirror 6 editor with JSON syntax highlighting,
 * folding, and problems marked on their lines: the parse error, or else the same schema and
 * server errors the form shows, each placed by its JSON pointer.
 *
 * CodeMirror injects its styles as <style> elements: under the console's CSP (`style-src
 * 'self' 'nonce-…'`) they carry the page's nonce, read from the mount element's
 * data-csp-nonce, through EditorView.cspNonce. Nothing here evaluates code.
 */
import { useEffect, useRef } from "react";
import { EditorState } from "@codemirror/state";
import { EditorView, drawSelection, highlightActiveLine, highlightActiveLineGutter, keymap, lineNumbers } from "@codemirror/view";
import { defaultKeymap, history, historyKeymap } from "@codemirror/commands";
import { bracketMatching, defaultHighlightStyle, ensureSyntaxTree, foldGutter, foldKeymap, indentOnInput, syntaxHighlighting } from "@codemirror/language";
import { json, jsonParseLinter } from "@codemirror/lang-json";
import { lintGutter, setDiagnostics } from "@codemirror/lint";
import { pointerTokens } from "./document.js";

const PUNCTUATION = new Set(["[", "]", "{", "}", ",", ":", "⚠"]);
const parseLinter = jsonParseLinter();

function valueOf(property) {
  const last = property.lastChild;
  return last && !PUNCTUATION.has(last.name) && last.name !== "PropertyName" ? last : null;
}

function childFor(state, node, token) {
  if (node.name === "Object") {
    for (let child = node.firstChild; child; child = child.nextSibling) {
      const name = child.name === "Property" ? child.getChild("PropertyName") : null;
      if (!name) continue;
      try {
        if (JSON.parse(state.sliceDoc(name.from, name.to)) === token) return { property: child, value: valueOf(child) };
      } catch {
        // a half-typed name never matches
      }
    }
  } else if (node.name === "Array") {
    let index = 0;
    for (let child = node.firstChild; child; child = child.nextSibling) {
      if (PUNCTUATION.has(child.name)) continue;
      if (String(index) === token) return { property: null, value: child };
      index += 1;
    }
  }
  return null;
}

/**
 * Where a JSON pointer lands in the text: the property (name and value) it names, or an
 * array item; when part of it is missing (a required member), the nearest member that is
 * there, or the first character of the object that lacks it.
 */
export function pointerRange(state, pointer) {
  const tree = ensureSyntaxTree(state, state.doc.length, 500);
  let node = tree && tree.topNode.firstChild;
  while (node && PUNCTUATION.has(node.name)) node = node.nextSibling;
  if (!node) return { from: 0, to: Math.min(1, state.doc.length) };
  let mark = { from: node.from, to: node.from + 1 };
  for (const token of pointerTokens(pointer)) {
    const found = childFor(state, node, token);
    if (!found) return mark;
    mark = markOf(found);
    if (!found.value) return mark;
    node = found.value;
  }
  return mark;
}

/** A member's mark: a scalar member whole, a nested object or array by its name (or its first line). */
function markOf({ property, value }) {
  const nested = value && (value.name === "Object" || value.name === "Array");
  if (property) {
    const name = property.getChild("PropertyName");
    return nested && name ? { from: name.from, to: name.to } : { from: property.from, to: property.to };
  }
  return nested ? { from: value.from, to: value.from + 1 } : { from: value.from, to: value.to };
}

/** A parse error's point widened to the rest of its line, so that the line shows the mark. */
function onItsLine(state, diagnostic) {
  const line = state.doc.lineAt(diagnostic.from);
  if (diagnostic.from < line.to) return { ...diagnostic, to: line.to };
  return { ...diagnostic, from: Math.max(line.from, diagnostic.from - 1), to: line.to };
}

export function diagnosticsFor(view, errors) {
  const parsing = parseLinter(view);
  if (parsing.length) return parsing.map((diagnostic) => onItsLine(view.state, diagnostic));
  return (errors || []).map((error) => ({
    ...pointerRange(view.state, error.path || ""),
    severity: "error",
    source: error.path || "guardrail",
    message: error.message,
  }));
}

function extensions(nonce, onChangeRef) {
  return [
    lineNumbers(),
    highlightActiveLineGutter(),
    foldGutter(),
    lintGutter(),
    history(),
    drawSelection(),
    indentOnInput(),
    bracketMatching(),
    highlightActiveLine(),
    syntaxHighlighting(defaultHighlightStyle, { fallback: true }),
    json(),
    keymap.of([...defaultKeymap, ...historyKeymap, ...foldKeymap]),
    EditorView.lineWrapping,
    EditorView.contentAttributes.of({
      "aria-labelledby": "guardrail-raw-json-label",
      "aria-describedby": "guardrail-raw-json-status",
      "aria-multiline": "true",
      role: "textbox",
    }),
    nonce ? EditorView.cspNonce.of(nonce) : [],
    EditorView.updateListener.of((update) => {
      if (update.docChanged) onChangeRef.current(update.state.doc.toString());
    }),
  ];
}

/** The editor; `text` and `onChange` as a textarea's, `errors` as [{path, message}]. */
export function JsonCodeEditor({ text, errors, onChange, nonce }) {
  const host = useRef(null);
  const viewRef = useRef(null);
  const onChangeRef = useRef(onChange);
  onChangeRef.current = onChange;

  useEffect(() => {
    const view = new EditorView({
      parent: host.current,
      state: EditorState.create({ doc: text, extensions: extensions(nonce, onChangeRef) }),
    });
    viewRef.current = view;
    return () => view.destroy();
    // The editor is made once per mount; later text arrives through the effect below.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [nonce]);

  useEffect(() => {
    const view = viewRef.current;
    if (!view) return;
    const current = view.state.doc.toString();
    if (current !== text) view.dispatch({ changes: { from: 0, to: current.length, insert: text } });
    view.dispatch(setDiagnostics(view.state, diagnosticsFor(view, errors)));
  }, [text, errors]);

  return <div id="guardrail-raw-json" className="kg-raw__editor" ref={host} />;
}
