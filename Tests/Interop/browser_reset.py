#!/usr/bin/env python3
"""Drives the password reset page (`GET/POST /actions`) in headless Chromium, as a person would.

Used by EndToEndTests (BrowserResetEndToEndTests): it opens the link from the mail, checks the
page (language, labels, the inline style allowed by the CSP), submits two different passwords
(the page must say they differ), then the new password twice, and checks the success text.
Screenshots go to --screenshots. Prints one JSON line with what it saw; exits 1 with a message
on the first failed check.

Only the Debian packages are used (/usr/bin/chromium, /usr/bin/chromedriver): the driver is
given explicitly, so Selenium Manager never tries to download one.

    browser_reset.py --link URL --password NEW --screenshots DIR
    browser_reset.py --check     # exit 0 when Chromium, its driver and Selenium are usable
"""

import argparse
import json
import os
import sys

CHROMIUM = os.environ.get("GATEHOUSE_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("GATEHOUSE_CHROMEDRIVER", "/usr/bin/chromedriver")


class CheckFailed(Exception):
    pass


def expect(condition, message):
    if not condition:
        raise CheckFailed(message)


def missing():
    """What is missing to run a browser, or None."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.access(path, os.X_OK):
            return f"{path} is not installed (Debian: apt-get install chromium chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "the Python package selenium is not installed (pip install selenium)"
    return None


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=900,900", "--lang=en-US"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def run(link, password, screenshots):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait
    from selenium.common.exceptions import WebDriverException

    os.makedirs(screenshots, exist_ok=True)
    seen = {"screenshots": []}
    driver = browser()
    driver.set_page_load_timeout(30)

    def shot(name):
        path = os.path.join(screenshots, name)
        driver.save_screenshot(path)
        seen["screenshots"].append(path)

    def heading():
        return driver.find_element(By.TAG_NAME, "h1").text

    def submit(first, second):
        old = driver.find_element(By.TAG_NAME, "h1")
        driver.find_element(By.ID, "password").send_keys(first)
        driver.find_element(By.ID, "passwordConfirm").send_keys(second)
        driver.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()

        def replaced(_):
            # Chrome may answer a query on a node of the page being replaced with a generic
            # "does not belong to the document" error rather than a stale-element one: both mean
            # the old page is gone.
            try:
                return EC.staleness_of(old)(driver)
            except WebDriverException:
                return True

        WebDriverWait(driver, 20).until(replaced)

    try:
        # 1. The form, from the link in the mail.
        driver.get(link)
        shot("01-form.png")
        expect(heading() == "Choose a new password", f"the form's heading is {heading()!r}")
        expect(driver.find_element(By.TAG_NAME, "html").get_attribute("lang") == "en", "the page is not marked lang=en")
        expect(len(driver.find_elements(By.TAG_NAME, "main")) == 1, "the page has no <main>")
        for field in ("password", "passwordConfirm"):
            label = driver.find_element(By.CSS_SELECTOR, f"label[for={field}]")
            expect(label.text.strip() != "", f"the field {field} has no label text")
            box = driver.find_element(By.ID, field)
            expect(box.get_attribute("type") == "password", f"{field} is not a password field")
            expect(box.get_attribute("autocomplete") == "new-password", f"{field} lacks autocomplete=new-password")
        # The inline style is applied: the CSP allows it by its hash.
        width = driver.execute_script("return getComputedStyle(document.querySelector('main')).maxWidth")
        expect(width == "480px", f"the page's style was not applied (main max-width {width!r}): is its CSP hash right?")
        seen["formTitle"] = driver.title

        # 2. Two different passwords: the same form again, with an alert.
        submit(password, password + "!")
        shot("02-mismatch.png")
        alerts = driver.find_elements(By.CSS_SELECTOR, "[role=alert]")
        expect(len(alerts) == 1 and "not the same" in alerts[0].text, f"no mismatch alert; the page says {driver.find_element(By.TAG_NAME, 'main').text!r}")
        expect(heading() == "Choose a new password", f"after a mismatch the heading is {heading()!r}")
        seen["mismatchAlert"] = alerts[0].text

        # 3. The new password twice: done.
        submit(password, password)
        shot("03-done.png")
        expect(heading() == "Your password has been changed", f"after submitting the heading is {heading()!r}")
        expect(not driver.find_elements(By.TAG_NAME, "form"), "the success page still has a form")
        seen["doneText"] = driver.find_element(By.TAG_NAME, "main").text

        # No console errors (a blocked style, a blocked form post...) but the 422 of the mismatch.
        problems = [
            entry["message"] for entry in driver.get_log("browser")
            if entry.get("level") == "SEVERE" and "responded with a status of 422" not in entry["message"]
        ]
        expect(not problems, f"the browser logged errors: {problems}")
    except Exception:
        try:
            shot("failure.png")
            seen["failurePage"] = driver.page_source[:4000]
        except Exception:
            pass
        raise
    finally:
        driver.quit()
    return seen


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--link")
    parser.add_argument("--password")
    parser.add_argument("--screenshots")
    args = parser.parse_args()
    problem = missing()
    if args.check:
        if problem:
            print(problem)
            return 1
        return 0
    if problem:
        print(f"browser_reset: {problem}", file=sys.stderr)
        return 2
    try:
        seen = run(args.link, args.password, args.screenshots)
    except CheckFailed as failure:
        print(f"browser_reset: {failure}", file=sys.stderr)
        return 1
    print(json.dumps(seen))
    return 0


if __name__ == "__main__":
    sys.exit(main())
