package interop.spring;

import java.util.List;

/** The POJO the json_conversion scenario sends through JacksonJsonMessageConverter and back. */
public record Order(String id, int quantity, List<String> items) {
}
