// The embeddable widget's loader: one <script src="https://ASSISTANT/widget.js" data-...> on any docs page adds a
// launcher button and, when it is pressed, the chat panel (an iframe of ASSISTANT/widget). Nothing loads from the
// assistant until the visitor opens the panel. The launcher and the frame live in a shadow root whose :host resets
// every property, so the page's styles do not reach them and theirs do not reach the page.
//
// data-title     the panel's title (default "Ask the docs")
// data-label     the launcher's text (default "Ask the docs")
// data-position  "right" (default) or "left"
// data-why       "on" shows the "why this answer" panel under each answer (default off)
// data-accent    the launcher's colour, #rgb or #rrggbb (default #1f5fbf)
// data-open      "on" opens the panel at once
(() => {
  const SVG = "http://www.w3.org/2000/svg";
  const ICON = "M4 4h16a2 2 0 0 1 2 2v10a2 2 0 0 1-2 2H9l-5 4v-4a2 2 0 0 1-2-2V6a2 2 0 0 1 2-2z";

  /** The tag's data- attributes, checked, and the panel's URL (the page's origin and options in its query). */
  function settingsOf(script) {
    const data = script.dataset;
    const frameUrl = new URL("widget", script.src);
    const title = (data.title || "Ask the docs").slice(0, 80);
    const why = data.why === "on" ? "1" : "0";
    frameUrl.search = new URLSearchParams({ site: location.origin, title, why });
    return {
      frameUrl,
      assistant: frameUrl.origin,
      title,
      label: (data.label || "Ask the docs").slice(0, 40),
      side: data.position === "left" ? "left" : "right",
      accent: /^#([0-9a-f]{3}|[0-9a-f]{6})$/i.test(data.accent || "") ? data.accent : "#1f5fbf",
      open: data.open === "on",
    };
  }

  function css({ side, accent }) {
    return `
:host { all: initial !important; display: block !important; position: fixed !important; z-index: 2147483000 !important;
  inset: auto !important; bottom: 0 !important; ${side}: 0 !important; width: 0 !important; height: 0 !important;
  visibility: visible !important; opacity: 1 !important; transform: none !important; }
* { box-sizing: border-box; }
.launcher { all: initial; position: fixed; bottom: 20px; ${side}: 20px; display: inline-flex; align-items: center;
  gap: 8px; padding: 12px 18px; border-radius: 999px; background: ${accent}; color: #fff; cursor: pointer;
  font: 600 15px/1.2 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; box-shadow: 0 4px 16px rgb(0 0 0 / 25%); }
.launcher:focus-visible { outline: 3px solid #f29900; outline-offset: 3px; }
.launcher svg { width: 18px; height: 18px; fill: currentColor; }
.panel { position: fixed; bottom: 84px; ${side}: 20px; width: 400px; height: min(640px, calc(100vh - 104px));
  border-radius: 12px; overflow: hidden; background: #fff; box-shadow: 0 8px 40px rgb(0 0 0 / 30%); }
.panel[hidden] { display: none; }
iframe { display: block; width: 100%; height: 100%; border: 0; margin: 0; padding: 0; color-scheme: normal; }
@media (max-width: 480px) {
  .panel { inset: 0; width: 100%; height: 100%; border-radius: 0; }
}`;
  }

  /** A constructed stylesheet, not an inline <style>: a host page whose CSP forbids inline styles allows it. */
  function adopt(root, text) {
    if ("adoptedStyleSheets" in root && typeof CSSStyleSheet.prototype.replaceSync === "function") {
      const sheet = new CSSStyleSheet();
      sheet.replaceSync(text);
      root.adoptedStyleSheets = [sheet];
    } else {
      const style = document.createElement("style");
      style.textContent = text;
      root.append(style);
    }
  }

  function launcherButton(label) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "launcher";
    button.setAttribute("aria-haspopup", "dialog");
    button.setAttribute("aria-expanded", "false");
    button.setAttribute("aria-controls", "anaphora-panel");
    const icon = document.createElementNS(SVG, "svg");
    icon.setAttribute("viewBox", "0 0 24 24");
    icon.setAttribute("aria-hidden", "true");
    const path = document.createElementNS(SVG, "path");
    path.setAttribute("d", ICON);
    icon.append(path);
    const text = document.createElement("span");
    text.textContent = label;
    button.append(icon, text);
    return button;
  }

  /** Open and close the panel; the frame is created on first open, and Esc in it (a message) closes it. */
  function wire(settings, launcher, panel) {
    let frame = null;
    const open = () => {
      if (!frame) {
        frame = document.createElement("iframe");
        frame.title = settings.title;
        frame.src = settings.frameUrl.href;
        frame.referrerPolicy = "origin";
        panel.append(frame);
      }
      panel.hidden = false;
      launcher.setAttribute("aria-expanded", "true");
      frame.focus();
      frame.contentWindow?.postMessage({ type: "anaphora:open" }, settings.assistant);
    };
    const close = () => {
      panel.hidden = true;
      launcher.setAttribute("aria-expanded", "false");
      launcher.focus();
    };
    launcher.addEventListener("click", () => (panel.hidden ? open() : close()));
    launcher.addEventListener("keydown", (event) => event.key === "Escape" && !panel.hidden && close());
    window.addEventListener("message", (event) => {
      const fromPanel = frame && event.source === frame.contentWindow && event.origin === settings.assistant;
      if (fromPanel && event.data?.type === "anaphora:close") close();
    });
    return open;
  }

  function mount(script) {
    const settings = settingsOf(script);
    const host = document.createElement("div");
    host.setAttribute("data-anaphora-widget", "");
    const root = host.attachShadow({ mode: "open" });
    adopt(root, css(settings));
    const launcher = launcherButton(settings.label);
    const panel = document.createElement("div");
    panel.className = "panel";
    panel.id = "anaphora-panel";
    panel.hidden = true;
    root.append(launcher, panel);
    const open = wire(settings, launcher, panel);
    const attach = () => {
      document.body.append(host);
      if (settings.open) open();
    };
    if (document.body) attach();
    else document.addEventListener("DOMContentLoaded", attach);
  }

  const script = document.currentScript;
  if (script && !document.querySelector("[data-anaphora-widget]")) mount(script); // one widget per page
})();
