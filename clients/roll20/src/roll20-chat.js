// Roll20's chat, as the bridge touches it: the chat input, its send button, and the message list.
//
// Roll20 has no API for a browser extension; Beyond20 (the D&D Beyond bridge) works with the chat's DOM and
// the bridge does the same, with the same elements:
//   #textchat-input           the chat form; its textarea is the input and its first button sends
//   #textchat .content        the message list; each message is a div.message (general, whisper, rollresult…)
// Posting writes the message into the textarea, clicks the send button (Roll20's own handler then sends it
// as if the player had typed it) and puts back whatever the player was typing.

import { isCommand } from "./commands.js";

export const SELECTORS = Object.freeze({
  form: "#textchat-input",
  input: "#textchat-input textarea",
  send: "#textchat-input button",
  messages: "#textchat .content .message",
});

export class Roll20Chat {
  /** @param {Document} doc */
  constructor(doc) {
    this.doc = doc;
    this._queue = Promise.resolve();
    this._unintercept = null;
  }

  /** @returns {{ input: HTMLTextAreaElement, send: HTMLButtonElement } | null} */
  elements() {
    const input = this.doc.querySelector(SELECTORS.input);
    const send = this.doc.querySelector(SELECTORS.send);
    return input && send ? { input: /** @type {HTMLTextAreaElement} */ (input), send: /** @type {HTMLButtonElement} */ (send) } : null;
  }

  /** Resolves once Roll20 has drawn its chat (it builds the editor after the page loads). */
  ready(timeoutMs = 120_000) {
    const found = this.elements();
    if (found) return Promise.resolve(found);
    return new Promise((resolve, reject) => {
      const observer = new MutationObserver(() => {
        const els = this.elements();
        if (!els) return;
        observer.disconnect();
        clearTimeout(timer);
        resolve(els);
      });
      observer.observe(this.doc.documentElement, { childList: true, subtree: true });
      const timer = setTimeout(() => {
        observer.disconnect();
        reject(new Error("Roll20's chat did not appear on this page."));
      }, timeoutMs);
    });
  }

  /**
   * Send one message as the player. Messages go out one at a time, in order.
   * @param {string} text
   * @returns {Promise<void>}
   */
  post(text) {
    const run = async () => {
      const { input, send } = await this.ready();
      const typing = input.value;
      input.value = text;
      send.click();
      input.value = typing;
    };
    const next = this._queue.then(run);
    this._queue = next.catch(() => {});
    return next;
  }

  /**
   * Whether a message showing `tag` (chatline.js eventTag) is in the chat already, posted by this bridge
   * before a reload or by another player's bridge.
   * @param {string} tag
   */
  shows(tag) {
    const escaped = tag.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    // "#12" must not match "#123", and the main post must not match "#12 sealed".
    const pattern = new RegExp(`${escaped}(?![0-9]|\\s(?:sealed|gm)\\b)`);
    for (const message of this.doc.querySelectorAll(SELECTORS.messages)) {
      if (pattern.test(message.textContent ?? "")) return true;
    }
    return false;
  }

  /**
   * Take the bridge's commands (`!tr …`) out of the chat before Roll20 sends them. Roll20 sends on Enter in
   * the textarea and on a click of the send button; listeners on the window in the capture phase run before
   * any listener on those elements, so Roll20's handlers never see a command.
   * @param {(text: string) => void} onCommand
   */
  intercept(onCommand) {
    this._unintercept?.();
    const win = this.doc.defaultView;
    if (!win) throw new Error("The chat's document has no window.");
    const take = (event) => {
      const els = this.elements();
      if (!els || !isCommand(els.input.value)) return;
      event.preventDefault();
      event.stopImmediatePropagation();
      const text = els.input.value;
      els.input.value = "";
      onCommand(text);
    };
    const onKey = (event) => {
      if (event.key !== "Enter" || event.shiftKey || event.isComposing) return;
      if (event.target !== this.elements()?.input) return;
      take(event);
    };
    const onClick = (event) => {
      const send = this.elements()?.send;
      if (!send || !(event.target instanceof win.Node) || !send.contains(event.target)) return;
      take(event);
    };
    win.addEventListener("keydown", onKey, true);
    win.addEventListener("click", onClick, true);
    this._unintercept = () => {
      win.removeEventListener("keydown", onKey, true);
      win.removeEventListener("click", onClick, true);
    };
    return this._unintercept;
  }
}
